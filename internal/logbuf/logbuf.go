// Package logbuf writes a process's log to one stream with two kinds of line: lines that go out
// at once (security events, errors, everything slog writes) and lines that may wait a moment
// (access lines, one a request), which are held in a buffer and written together, so that
// serving a request costs no write system call of its own.
//
// Held lines are kept by processor (internal/shard): one buffer every request appended to
// under one lock went from core to core with its lock, about 1 µs of CPU a request on a busy
// 2-core machine (issue 23). They are written, with one write for each buffer that holds
// any, straight from where they were built, when a processor's buffer is full, every period,
// before any line that goes out at once (so a line written at once never comes before a held
// line written before it), and at Close. Lines held by two processors keep
// their order within each, not between them: their times say it. A crash loses the held
// lines: at most one period's worth, and never more than MaxHeld.
package logbuf

import (
	"io"
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
	now []byte // a line written at once by writeNow (under out)

	closed atomic.Bool // Held's lines go out at once: after Close, or with no period
	slots  *shard.Pool
	shards []heldShard // by slot index

	stop chan struct{}
	done chan struct{}
}

// heldShard is one processor's held lines, padded so that two shards share no cache line.
// The lines are appended to buf under mu; writeHeld swaps it for spare (under mu, and out,
// which alone guards spare) and writes it with no lock but out, so that a line is never
// copied between being built and being written. buf holds less than bufferSize before a
// line is added, so at most bufferSize plus a line.
type heldShard struct {
	mu    sync.Mutex
	buf   []byte
	spare []byte
	_     [128 - 8 - 2*24]byte
}

// New returns a Writer to w that writes its held lines at least every period; with a period
// of 0, Held's lines go out at once too. Close it.
func New(w io.Writer, period time.Duration) *Writer {
	n := shard.PerProcessor()
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
			_ = l.writeHeld()
			l.out.Unlock()
		}
	}
}

// Write writes the held lines and then p, at once. It reports p's write alone: a held line's
// failed write is dropped, as writeHeld says.
func (l *Writer) Write(p []byte) (int, error) {
	l.out.Lock()
	defer l.out.Unlock()
	_ = l.writeHeld()
	if len(p) == 0 {
		return 0, nil
	}
	return l.w.Write(p)
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
// processor's lock, so it must not block, write to the Writer or keep the buffer. Building
// the line where it waits saves a copy of it; the access log's line is built so
// (internal/api). A buffer that is full when a line comes is written first, with the rest.
func (h Held) AppendLine(appendLine func([]byte) []byte) error {
	l := h.l
	for !l.closed.Load() {
		t := l.slots.Get()
		held, closed := l.shards[t.Index()].hold(appendLine, &l.closed)
		l.slots.Put(t)
		if held {
			return nil
		}
		if closed {
			break
		}
		// Full: everything held goes out, then the line is held. out is taken before a
		// shard's lock, so that one was let go first.
		l.out.Lock()
		err := l.writeHeld()
		l.out.Unlock()
		if err != nil {
			return err
		}
	}
	return l.writeNow(appendLine)
}

// hold appends a line to the shard's buffer unless the Writer is closed or the buffer full.
func (s *heldShard) hold(appendLine func([]byte) []byte, closed *atomic.Bool) (held, isClosed bool) {
	s.mu.Lock()
	defer s.mu.Unlock() // appendLine is the caller's code
	if closed.Load() {
		return false, true
	}
	if len(s.buf) >= bufferSize {
		return false, false
	}
	if s.buf == nil {
		s.buf = make([]byte, 0, bufferSize+lineRoom)
	}
	s.buf = appendLine(s.buf)
	return true, false
}

// writeNow writes a line at once, after Close or with no period: everything held first, then
// the line, built in a buffer the Writer keeps for it.
func (l *Writer) writeNow(appendLine func([]byte) []byte) error {
	l.out.Lock()
	defer l.out.Unlock()
	_ = l.writeHeld()
	b := appendLine(l.now[:0])
	if cap(b) <= lineRoom { // an outsized line's buffer is left to the collector
		l.now = b
	}
	_, err := l.w.Write(b)
	return err
}

// writeHeld writes every shard's held lines, a write a shard; l.out is held. It returns the
// first error. A failed write drops its lines, as a failed write of an unbuffered log would:
// the log must not grow without bound behind a broken stream.
func (l *Writer) writeHeld() error {
	var err error
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		b := s.buf
		s.buf = s.spare
		s.mu.Unlock()
		if len(b) > 0 {
			if _, werr := l.w.Write(b); err == nil {
				err = werr
			}
		}
		if cap(b) > bufferSize+lineRoom { // a buffer an outsized line grew is left to the collector
			b = nil
		}
		s.spare = b[:0]
	}
	return err
}

// MaxHeld is the most a crash can lose: every shard's buffer, full, and the line that filled
// it (an access line is far shorter than lineRoom).
func (l *Writer) MaxHeld() int { return len(l.shards) * (bufferSize + lineRoom) }

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
	err := l.writeHeld()
	l.out.Unlock()
	close(l.stop) // the timer's goroutine, started by New, ends
	<-l.done
	return err
}
