// Package logbuf writes a process's log to one stream with two kinds of line: lines that go out
// at once (security events, errors, everything slog writes) and lines that may wait a moment
// (access lines, one a request), which are held in a buffer and written together, so that
// serving a request costs no write system call of its own.
//
// Held lines are written when the buffer fills, every period, before any line that goes out at
// once (so the stream stays in order), and at Close. A crash loses the held lines: at most one
// period's worth, and never more than the buffer's size.
package logbuf

import (
	"io"
	"sync"
	"time"
)

// bufferSize is how many bytes of held lines are written at once when the period has not
// come: at 20,000 access lines a second, about 300 lines and 60 a second.
const bufferSize = 64 << 10

// Writer is an io.Writer whose Write goes out at once, with Held for lines that may wait. It
// is safe for concurrent use.
type Writer struct {
	mu     sync.Mutex
	w      io.Writer
	buf    []byte
	closed bool // Held's lines go out at once: after Close, or with no period
	stop   chan struct{}
	done   chan struct{}
}

// New returns a Writer to w that writes its held lines at least every period; with a period
// of 0, Held's lines go out at once too. Close it.
func New(w io.Writer, period time.Duration) *Writer {
	l := &Writer{w: w, stop: make(chan struct{}), done: make(chan struct{})}
	if period <= 0 {
		l.closed = true // nothing is held
		close(l.done)
		return l
	}
	l.buf = make([]byte, 0, bufferSize)
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
			l.mu.Lock()
			l.flush()
			l.mu.Unlock()
		}
	}
}

// Write writes the held lines and then p, at once.
func (l *Writer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 && len(l.buf)+len(p) <= cap(l.buf) {
		// One write for both, in order.
		l.buf = append(l.buf, p...)
		return len(p), l.flush()
	}
	l.flush()
	return l.w.Write(p)
}

// Held returns an io.Writer whose lines wait in the buffer (each Write a whole line, which is
// copied): for the access log. After Close its lines go out at once.
func (l *Writer) Held() io.Writer { return held{l} }

type held struct{ l *Writer }

func (h held) Write(p []byte) (int, error) {
	l := h.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return l.w.Write(p)
	}
	if len(l.buf)+len(p) > cap(l.buf) {
		if err := l.flush(); err != nil {
			return 0, err
		}
		if len(p) > cap(l.buf) {
			return l.w.Write(p)
		}
	}
	l.buf = append(l.buf, p...)
	return len(p), nil
}

// flush writes the held lines; l.mu is held. A failed write drops them, as a failed write
// of an unbuffered log would: the log must not grow without bound behind a broken stream.
func (l *Writer) flush() error {
	if len(l.buf) == 0 {
		return nil
	}
	_, err := l.w.Write(l.buf)
	l.buf = l.buf[:0]
	return err
}

// Close writes the held lines and stops the timer; lines written after it go out at once.
// A clean stop calls it after the last request has been answered, so that it loses none.
func (l *Writer) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	err := l.flush()
	l.mu.Unlock()
	close(l.stop) // the timer's goroutine, started by New, ends
	<-l.done
	return err
}
