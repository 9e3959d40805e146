package logbuf_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/apitest"
	"github.com/terdut-server/terdut-server/internal/logbuf"
)

// TestWriter: held lines wait for the timer, a full buffer or a line that goes out at once
// (which they precede), and Close; after Close they go out at once.
func TestWriter(t *testing.T) {
	t.Run("HeldUntilImmediate", func(t *testing.T) {
		out := &apitest.SyncBuffer{}
		l := logbuf.New(out, time.Hour)
		defer l.Close()
		held := l.Held()
		for _, s := range []string{"a\n", "b\n", "c\n"} {
			_, _ = held.Write([]byte(s))
		}
		if out.Writes() != 0 {
			t.Fatalf("writes after three held lines: got %d, want 0", out.Writes())
		}
		_, _ = l.Write([]byte("error\n"))
		// Two writes: the processor's buffer, straight from where the lines were built, and
		// the line that goes out at once.
		if got, want := out.String(), "a\nb\nc\nerror\n"; got != want || out.Writes() != 2 {
			t.Errorf("after a line that goes out at once: got %q in %d writes, want %q in 2", got, out.Writes(), want)
		}
	})
	t.Run("Timer", func(t *testing.T) {
		out := &apitest.SyncBuffer{}
		l := logbuf.New(out, 10*time.Millisecond)
		defer l.Close()
		_, _ = l.Held().Write([]byte("a\n"))
		deadline := time.Now().Add(10 * time.Second)
		for out.String() != "a\n" {
			if time.Now().After(deadline) {
				t.Fatalf("a held line after 10s with a 10ms period: got %q, want it written", out.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
	t.Run("Full", func(t *testing.T) {
		out := &apitest.SyncBuffer{}
		l := logbuf.New(out, time.Hour)
		defer l.Close()
		line := strings.Repeat("x", 1023) + "\n"
		n := 4 * l.MaxHeld() / len(line)
		for i := 0; i < n; i++ {
			_, _ = l.Held().Write([]byte(line))
		}
		if held := n*len(line) - len(out.String()); held > l.MaxHeld() || out.Writes() < 3 {
			t.Errorf("after %d KiB of held lines: %d KiB held after %d writes, want at most %d KiB",
				n, held>>10, out.Writes(), l.MaxHeld()>>10)
		}
		_ = l.Close()
		if got := len(out.String()); got != n*len(line) {
			t.Errorf("bytes written after Close: got %d, want %d", got, n*len(line))
		}
	})
	t.Run("Concurrent", func(t *testing.T) {
		// Goroutines hold lines and write lines at once, on every processor, while the timer
		// runs: each line is written once and whole, and a goroutine's held lines precede the
		// line it then writes at once.
		out := &apitest.SyncBuffer{}
		l := logbuf.New(out, time.Millisecond)
		const goroutines, lines = 16, 2000
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range lines {
					line := fmt.Appendf(nil, "%d %d held\n", g, i)
					if i%100 == 99 {
						line = fmt.Appendf(nil, "%d %d now\n", g, i)
						_, _ = l.Write(line)
						continue
					}
					_, _ = l.Held().Write(line)
				}
			}()
		}
		wg.Wait()
		_ = l.Close()
		seen := map[string]int{}
		for n, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
			var g, i int
			var kind string
			if _, err := fmt.Sscanf(line, "%d %d %s", &g, &i, &kind); err != nil {
				t.Fatalf("line %d %q: not a whole line: %v", n, line, err)
			}
			if seen[line]++; seen[line] > 1 {
				t.Fatalf("line %q written twice", line)
			}
			if kind == "now" {
				for j := i - 99; j < i; j++ {
					if seen[fmt.Sprintf("%d %d held", g, j)] == 0 {
						t.Fatalf("%q written before the held line %d %d it follows", line, g, j)
					}
				}
			}
		}
		if len(seen) != goroutines*lines {
			t.Errorf("%d lines written, want %d", len(seen), goroutines*lines)
		}
	})
	t.Run("AppendLine", func(t *testing.T) {
		// A line built in place is held like one written, and after Close goes out at once.
		out := &apitest.SyncBuffer{}
		l := logbuf.New(out, time.Hour)
		held := l.Held()
		build := func(s string) func([]byte) []byte {
			return func(b []byte) []byte { return append(append(b, s...), '\n') }
		}
		for _, s := range []string{"a", "b"} {
			if err := held.AppendLine(build(s)); err != nil {
				t.Fatal(err)
			}
		}
		if out.Writes() != 0 {
			t.Fatalf("writes after two lines built in place: got %d, want 0", out.Writes())
		}
		_ = l.Close()
		if err := held.AppendLine(build("c")); err != nil {
			t.Fatal(err)
		}
		// Lines held by two processors (the goroutine may move) keep no order between them.
		if got := out.String(); got != "a\nb\nc\n" && got != "b\na\nc\n" {
			t.Errorf("got %q, want a and b, then c", got)
		}
	})
	t.Run("FullLine", func(t *testing.T) {
		// The line that fills a buffer goes out with it, at once, whole: a line longer than a
		// buffer too.
		out := &apitest.SyncBuffer{}
		l := logbuf.New(out, time.Hour)
		defer l.Close()
		long := strings.Repeat("y", l.MaxHeld()) + "\n"
		_, _ = l.Held().Write([]byte("a\n"))
		_, _ = l.Held().Write([]byte(long))
		if got := out.String(); got != "a\n"+long && got != long+"a\n" {
			t.Errorf("after a line longer than a buffer: %d bytes written, want its %d and the line before it", len(got), len(long))
		}
	})
	t.Run("Failed", func(t *testing.T) {
		// A failed write drops what it held and is reported; the lines after it are written.
		out := &failingWriter{fail: true}
		l := logbuf.New(out, time.Hour)
		defer l.Close()
		_, _ = l.Held().Write([]byte("lost\n"))
		if _, err := l.Write([]byte("error\n")); err == nil {
			t.Fatalf("a failed write: got no error")
		}
		out.fail = false
		_, _ = l.Held().Write([]byte("a\n"))
		_ = l.Close()
		if got := out.b.String(); got != "a\n" {
			t.Errorf("after a failed write: got %q, want only the line held after it", got)
		}
	})
	t.Run("Close", func(t *testing.T) {
		out := &apitest.SyncBuffer{}
		l := logbuf.New(out, time.Hour)
		_, _ = l.Held().Write([]byte("a\n"))
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if got := out.String(); got != "a\n" {
			t.Errorf("after Close: got %q, want the held line", got)
		}
		_, _ = l.Held().Write([]byte("b\n"))
		if got := out.String(); got != "a\nb\n" {
			t.Errorf("a held line after Close: got %q, want it written at once", got)
		}
		if err := l.Close(); err != nil {
			t.Errorf("second Close: got %v, want nil", err)
		}
	})
	t.Run("NoPeriod", func(t *testing.T) {
		out := &apitest.SyncBuffer{}
		l := logbuf.New(out, 0)
		_, _ = l.Held().Write([]byte("a\n"))
		if got := out.String(); got != "a\n" {
			t.Errorf("a held line with a period of 0: got %q, want it written at once", got)
		}
		if err := l.Close(); err != nil {
			t.Errorf("Close: got %v, want nil", err)
		}
	})
}

// failingWriter fails every write while fail is set, and keeps the others.
type failingWriter struct {
	fail bool
	b    strings.Builder
}

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.fail {
		return 0, errors.New("no space left on device")
	}
	return w.b.Write(p)
}
