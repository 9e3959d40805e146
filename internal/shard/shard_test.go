package shard_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/shard"
)

// TestShardPool: a token takes a free index, the lowest first; with none free it shares one;
// an index is free again once every token that held it is gone.
func TestShardPool(t *testing.T) {
	p := shard.NewPool(2)
	var held []*shard.Token
	for range 5 {
		held = append(held, p.Get())
	}
	var indices []int
	for _, tok := range held {
		indices = append(indices, tok.Index())
	}
	if fmt.Sprint(indices) != "[0 1 0 1 0]" {
		t.Fatalf("indices %v, want [0 1 0 1 0]", indices)
	}
	if i, n := p.InUse(); i != 2 || n != 5 {
		t.Fatalf("%d indices and %d tokens in use, want 2 and 5", i, n)
	}
	waitInUse := func(indices int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			runtime.GC()
			if i, _ := p.InUse(); i == indices {
				return
			}
			if time.Now().After(deadline) {
				i, n := p.InUse()
				t.Fatalf("%d indices and %d tokens in use, want %d indices", i, n, indices)
			}
		}
	}
	// Index 1's two tokens go: it is free, and the next token takes it.
	held = []*shard.Token{held[0], held[2], held[4]}
	waitInUse(1)
	if tok := p.Get(); tok.Index() != 1 {
		t.Fatalf("index %d, want the freed 1", tok.Index())
	}
	runtime.KeepAlive(held)
	held = nil
	waitInUse(0)
}
