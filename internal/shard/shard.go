// Package shard hands out small integers, shard indices, with a processor's affinity, so that
// state every request writes (counts, buffers) can be kept in one shard an index and the
// writes of one processor go to lines no other core writes. On a busy 2-core machine, one
// counter every request added to cost about 1 µs of CPU a request as its cache line went from
// core to core (issue 23); a shard kept by the processor costs nothing of the kind.
//
// A sync.Pool keeps a Token for each P, so the requests one P runs take the same token, and
// its index, one after another. Only one goroutine holds a token at a time, but nothing may
// depend on it: two tokens can share an index (below), so a shard is written atomically or
// under a lock of its own, and its state lives with the caller, by index, not in the token.
//
// The pool drops its tokens at a garbage collection. A dropped token's cleanup frees its
// index, and a token made later takes a free index first, so the indices in use stay about
// GOMAXPROCS plus the tokens held at once. There are Len of them: when every one is held, a
// new token shares one (round robin), correct still, its writes only contended.
package shard

import (
	"runtime"
	"sync"
)

// Pool hands out tokens. It is safe for concurrent use.
type Pool struct {
	pool sync.Pool // of *Token
	max  int

	mu      sync.Mutex
	free    []int // indices no token holds
	holders []int // by index, the tokens alive that hold it
	shared  int   // the index the next token to share takes
	tokens  int   // tokens alive, for tests
}

// Token holds a shard index until it is put back.
type Token struct {
	index int
	// _ makes a token 16 bytes, too large for the tiny allocator, which packs small objects
	// without pointers together: the cleanup of one packed with a live one may never run.
	_ [8]byte
}

// Index is the token's shard index, in [0, Len).
func (t *Token) Index() int { return t.index }

// NewPool returns a pool of n indices.
func NewPool(n int) *Pool {
	p := &Pool{max: n, holders: make([]int, n)}
	for i := n - 1; i >= 0; i-- {
		p.free = append(p.free, i)
	}
	p.pool.New = func() any { return p.newToken() }
	return p
}

// PerProcessor is the number of indices a pool shared by the requests of every processor
// wants: four a processor Go runs on, room for the tokens requests hold at once, past which
// they share, and at least 8.
func PerProcessor() int { return max(8, 4*runtime.GOMAXPROCS(0)) }

// Len is the number of indices.
func (p *Pool) Len() int { return p.max }

// Get returns a token, usually the one the calling processor used last. Put it back.
func (p *Pool) Get() *Token { return p.pool.Get().(*Token) }

// Put gives t back, for the processor's next Get.
func (p *Pool) Put(t *Token) { p.pool.Put(t) }

func (p *Pool) newToken() *Token {
	p.mu.Lock()
	defer p.mu.Unlock()
	var i int
	if n := len(p.free); n > 0 {
		i, p.free = p.free[n-1], p.free[:n-1]
	} else {
		i, p.shared = p.shared, (p.shared+1)%p.max
	}
	p.holders[i]++
	p.tokens++
	t := &Token{index: i}
	runtime.AddCleanup(t, p.release, i)
	return t
}

// release is a dropped token's cleanup: its index is free once no other token holds it.
func (p *Pool) release(i int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tokens--
	if p.holders[i]--; p.holders[i] == 0 {
		p.free = append(p.free, i)
	}
}

// InUse returns how many indices tokens hold and how many tokens are alive (not yet cleaned
// up): for tests.
func (p *Pool) InUse() (indices, tokens int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.max - len(p.free), p.tokens
}
