package logbuf_test

import (
	"strings"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/apitest"
	"github.com/terdut-server/terdut-server/internal/logbuf"
)

// TestWriter: held lines wait for the timer, a full buffer or a line that goes out at once
// (which they precede, in one write), and Close; after Close they go out at once.
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
		if got, want := out.String(), "a\nb\nc\nerror\n"; got != want || out.Writes() != 1 {
			t.Errorf("after a line that goes out at once: got %q in %d writes, want %q in 1", got, out.Writes(), want)
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
		for i := 0; i < 1000; i++ {
			_, _ = l.Held().Write([]byte(line))
		}
		if w := out.Writes(); w < 10 || w > 20 {
			t.Errorf("writes for 1000 KiB of held lines: got %d, want one each 64 KiB", w)
		}
		_ = l.Close()
		if got := len(out.String()); got != 1000*len(line) {
			t.Errorf("bytes written after Close: got %d, want %d", got, 1000*len(line))
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
