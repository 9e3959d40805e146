// Package logbuf writes a process's log to one stream with two kinds of line: lines that go out
// at once (security events, errors, everything slog writes) and lines that may wait a moment
// (access lines, one a request), which are held in a buffer and written together, so that
// serving a request costs no write system call of its own.
//
// Held lines are kept by processor (internal/shard): one buffer every request appended to
// under one lock went from core to core with its lock, about 1 µs of CPU a request on a busy
// 2-core machine (issue 23). They are written, every processor's buffer straight from where
// it was built (a write a buffer that holds any), when a processor's buffer fills, every
// period, before any line that goes out at once (so a line written at once never comes
// before a held line written before it), and at Close. Lines held by two processors keep
// their order within each, not between them: their times say it. A crash loses the held
// lines: at most one period's worth, and never more than MaxHeld.
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

// lineRoom is room past bufferSize for the line that fills a buffer, so that it is appended
// without growing the buffer: an access line is a few hundred bytes.
const lineRoom = 4 << 10

// Writer is an io.Writer whose Write goes out at once, with Held for lines that may wait. It
// is safe for concurrent use.
type Writer struct {
	out sync.Mutex // held while writing to w; taken before any shard's mu
	w   io.Writer

	closed atomic.Bool // Held's lines go out at once: after Close, or with no period
	slots  *shard.Pool
	shards []heldShard // by slot index

	stop chan struct{}
	done chan struct{}
}

// heldShard is one processor's held lines, padded so that two shards share no cache line.
// The lines are appended to buf under mu; writeHeld swaps it for spare (under mu, and out,
// which alone guards spare) and writes it with no lock but out, so that a line is never
// copied between being built and being written.
type heldShard struct {
	mu    sync.Mutex
	buf   []byte
	spare []byte
	_     [128 - 8 - 2*24]byte
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

// Write writes the held lines and then p, at once.
func (l *Writer) Write(p []byte) (int, error) {
	l.out.Lock()
	defer l.out.Unlock()
	if err := l.writeHeld(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Held returns the Writer's lines that may wait, for the access log. After Close its lines go
// out at once.
func (l *Writer) Held() Held { return Held{l} }

// Held is an io.Writer whose lines wait in the buffer of the processor that writes them.
type Held struct{ l *Writer }

// Write holds p, one whole line, which is copied.
func (h Held) Write(p []byte) (int, error) {
	return len(p), h.AppendLine(func(b []byte) []byte { return append(b, p...) })
}

// AppendLine holds one whole line, built in place: appendLine appends it to the buffer it is
// given and returns the buffer, as strconv's Append functions do. It runs under the
// processor's lock and must not block or hold on to the buffer. Building the line where it
// waits saves a copy of it; the access log's line is built so (internal/api).
func (h Held) AppendLine(appendLine func([]byte) []byte) error {
	l := h.l
	t := l.slots.Get()
	s := &l.shards[t.Index()]
	s.mu.Lock()
	if l.closed.Load() {
		s.mu.Unlock()
		l.slots.Put(t)
		return h.writeNow(appendLine)
	}
	if s.buf == nil {
		s.buf = make([]byte, 0, bufferSize+lineRoom)
	}
	s.buf = appendLine(s.buf)
	full := len(s.buf) >= bufferSize
	s.mu.Unlock()
	l.slots.Put(t)
	if !full {
		return nil
	}
	// Everything held goes out. out is taken before a shard's lock, so this one was let go
	// first.
	l.out.Lock()
	defer l.out.Unlock()
	return l.writeHeld(nil)
}

// writeNow writes a line after Close (or with no period): everything held first, then it.
func (h Held) writeNow(appendLine func([]byte) []byte) error {
	_, err := h.l.Write(appendLine(nil))
	return err
}

// writeHeld writes every shard's held lines, a write a shard, and then p; l.out is held. A
// failed write drops them, and the lines held after them, as a failed write of an
// unbuffered log would: the log must not grow without bound behind a broken stream.
func (l *Writer) writeHeld(p []byte) error {
	var err error
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		b := s.buf
		s.buf = s.spare
		s.mu.Unlock()
		if len(b) > 0 && err == nil {
			_, err = l.w.Write(b)
		}
		if cap(b) > bufferSize+lineRoom { // a buffer an outsized line grew is left to the collector
			b = nil
		}
		s.spare = b[:0]
	}
	if len(p) > 0 && err == nil {
		_, err = l.w.Write(p)
	}
	return err
}

// MaxHeld is the most a crash can lose: every shard's buffer, full (a line that fills one
// is written at once with the rest).
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
