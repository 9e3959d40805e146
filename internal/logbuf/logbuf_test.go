package logbuf_test

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/logbuf"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
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
		// A write for each processor's buffer that holds any (the goroutine may move), then
		// the line that goes out at once.
		if got, want := out.String(), "a\nb\nc\nerror\n"; !sameLines(got, want) || out.Writes() < 2 ||
			!strings.HasSuffix(got, "error\n") {
			t.Errorf("after a line that goes out at once: got %q in %d writes, want %q, the held lines first", got, out.Writes(), want)
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
			wg.Go(func() {
				for i := range lines {
					line := fmt.Appendf(nil, "%d %d held\n", g, i)
					if i%100 == 99 {
						line = fmt.Appendf(nil, "%d %d now\n", g, i)
						_, _ = l.Write(line)
						continue
					}
					_, _ = l.Held().Write(line)
				}
			})
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
	t.Run("LongLine", func(t *testing.T) {
		// A line longer than a buffer is held whole, and written whole with the rest when the
		// next line finds its buffer full, or at Close.
		out := &apitest.SyncBuffer{}
		l := logbuf.New(out, time.Hour)
		long := strings.Repeat("y", l.MaxHeld()) + "\n"
		for _, line := range []string{"a\n", long, "b\n"} {
			_, _ = l.Held().Write([]byte(line))
		}
		_ = l.Close()
		if got := out.String(); !sameLines(got, "a\n"+long+"b\n") {
			t.Errorf("after a line longer than a buffer: %d bytes written, want %d, each line whole", len(got), len(long)+4)
		}
	})
	t.Run("NoPeriodAllocations", func(t *testing.T) {
		// With no period every line goes out at once, built in the Writer's own buffer.
		l := logbuf.New(io.Discard, 0)
		held := l.Held()
		line := []byte("a line\n")
		build := func(b []byte) []byte { return append(b, line...) }
		if n := testing.AllocsPerRun(100, func() { _ = held.AppendLine(build); _, _ = held.Write(line) }); n != 0 {
			t.Errorf("a line with no period: %v allocations, want 0", n)
		}
	})
	t.Run("Failed", func(t *testing.T) {
		// A failed write drops the held lines it carried; the line that goes out at once after
		// them is still written, and so are the lines held later.
		out := &failingWriter{}
		l := logbuf.New(out, time.Hour)
		_, _ = l.Held().Write([]byte("lost\n"))
		if _, err := l.Write([]byte("error\n")); err != nil {
			t.Fatalf("a line written at once after a failed write of held lines: %v", err)
		}
		_, _ = l.Held().Write([]byte("a\n"))
		_ = l.Close()
		if got := out.b.String(); got != "error\na\n" {
			t.Errorf("after a failed write: got %q, want the line written at once and the line held after it", got)
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

// failingWriter fails every write that holds "lost", and keeps the others.
type failingWriter struct{ b strings.Builder }

func (w *failingWriter) Write(p []byte) (int, error) {
	if strings.Contains(string(p), "lost") {
		return 0, errors.New("no space left on device")
	}
	return w.b.Write(p)
}

// sameLines reports whether a and b hold the same lines, in any order.
func sameLines(a, b string) bool {
	x, y := strings.SplitAfter(a, "\n"), strings.SplitAfter(b, "\n")
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}
