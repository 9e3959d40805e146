// Package logbuf writes a process's log to one stream with two kinds of line: lines that go out
// at once (security events, errors, everything slog writes) and lines that may wait a moment
// (access lines, one a request), which are held in a buffer and written together, so that
// serving a request costs no write system call of its own.
//
// Held lines are kept by processor (internal/shard): one buffer every request appended to
// under one lock went from core to core with its lock, about 1 µs of CPU a request on a busy
// 2-core machine (issue 23). They are written, all of them in one write, when a processor's
// buffer fills, every period, before any line that goes out at once (so a line written at once
// never comes before a held line written before it), and at Close. Lines held by two processors keep their order within
// each, not between them: their times say it. A crash loses the held lines: at most one
// period's worth, and never more than MaxHeld.
package logbuf

import (
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/terdut-server/terdut-server/internal/shard"
)

// bufferSize is how many bytes of held lines a shard keeps before they are written, when the
// period has not come: at 20,000 access lines a second on two processors, about 300 lines and
// 60 writes a second.
const bufferSize = 64 << 10

// Writer is an io.Writer whose Write goes out at once, with Held for lines that may wait. It
// is safe for concurrent use.
type Writer struct {
	out     sync.Mutex // held while writing to w; taken before any shard's mu
	w       io.Writer
	scratch []byte // the lines of one write (under out)

	closed atomic.Bool // Held's lines go out at once: after Close, or with no period
	slots  *shard.Pool
	shards []heldShard // by slot index

	stop chan struct{}
	done chan struct{}
}

// heldShard is one processor's held lines, padded so that two shards share no cache line.
type heldShard struct {
	mu  sync.Mutex
	buf []byte
	_   [128 - 8 - 24]byte
}

// New returns a Writer to w that writes its held lines at least every period; with a period
// of 0, Held's lines go out at once too. Close it.
func New(w io.Writer, period time.Duration) *Writer {
	n := max(8, 4*runtime.GOMAXPROCS(0))
	l := &Writer{w: w, slots: shard.NewPool(n), shards: make([]heldShard, n),
		stop: make(chan struct{}), done: make(chan struct{})}
	if period <= 0 {
		l.closed.Store(true) // nothing is held
		close(l.done)
		return l
	}
	go l.flushEvery(period)
	return l
}

func (l *Writer) flushEvery(period time.Duration) {
	defer close(l.done)
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-tick.C:
			l.out.Lock()
			_ = l.writeHeld(nil)
			l.out.Unlock()
		}
	}
}

// Write writes the held lines and then p, at once, in one write.
func (l *Writer) Write(p []byte) (int, error) {
	l.out.Lock()
	defer l.out.Unlock()
	if err := l.writeHeld(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Held returns an io.Writer whose lines wait in the buffer of the processor that writes them
// (each Write a whole line, which is copied): for the access log. After Close its lines go
// out at once.
func (l *Writer) Held() io.Writer { return held{l} }

type held struct{ l *Writer }

func (h held) Write(p []byte) (int, error) {
	l := h.l
	t := l.slots.Get()
	defer l.slots.Put(t)
	s := &l.shards[t.Index()]
	s.mu.Lock()
	if !l.closed.Load() && len(s.buf)+len(p) <= bufferSize {
		if s.buf == nil {
			s.buf = make([]byte, 0, bufferSize)
		}
		s.buf = append(s.buf, p...)
		s.mu.Unlock()
		return len(p), nil
	}
	// Closed, or the shard is full: everything held goes out, then p, in order. out is taken
	// before a shard's lock, so this one is let go first.
	s.mu.Unlock()
	l.out.Lock()
	defer l.out.Unlock()
	if err := l.writeHeld(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// writeHeld writes every shard's held lines and then p, in one write; l.out is held. A
// failed write drops them, as a failed write of an unbuffered log would: the log must not
// grow without bound behind a broken stream.
func (l *Writer) writeHeld(p []byte) error {
	b := l.scratch[:0]
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		b = append(b, s.buf...)
		s.buf = s.buf[:0]
		s.mu.Unlock()
	}
	b = append(b, p...)
	if cap(b) <= len(l.shards)*bufferSize {
		l.scratch = b
	}
	if len(b) == 0 {
		return nil
	}
	_, err := l.w.Write(b)
	return err
}

// MaxHeld is the most a crash can lose: every shard's buffer, full.
func (l *Writer) MaxHeld() int { return len(l.shards) * bufferSize }

// Close writes the held lines and stops the timer; lines written after it go out at once.
// A clean stop calls it after the last request has been answered, so that it loses none.
func (l *Writer) Close() error {
	l.out.Lock()
	if l.closed.Swap(true) {
		l.out.Unlock()
		return nil
	}
	// A line held from here on is one whose writer found closed false before the swap, under
	// its shard's lock, which writeHeld takes after it: it is written here.
	err := l.writeHeld(nil)
	l.out.Unlock()
	close(l.stop) // the timer's goroutine, started by New, ends
	<-l.done
	return err
}
