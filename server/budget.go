package server

import (
	"context"
	"sync"
)

// byteBudget bounds the bytes of request bodies being parsed at once.
// Parsing a generation request tokenizes its prompt, which allocates about
// 125 bytes per byte of text (a 4 MiB prompt: 0.5-0.7 GB, and up to 3 s of
// CPU for 4 MiB of spaces) before the context check can refuse it: sixty
// such requests at once took a server from 1 GB to 19 GB. Each request
// takes its body's length from the budget while it is parsed (a body larger
// than the whole budget takes all of it), so that at most a budget's worth
// of bodies is tokenized at a time; small requests pass beside large ones
// as long as there is room. Waiters are served in arrival order, so a large
// body is not starved by a stream of small ones.
type byteBudget struct {
	mu    sync.Mutex
	total int64 // the budget
	used  int64
	peak  int64     // the most ever in use (for tests)
	queue []*waiter // in arrival order
}

type waiter struct {
	n     int64
	ready chan struct{} // closed once the bytes are granted
}

func newByteBudget(total int64) *byteBudget { return &byteBudget{total: total} }

// acquire takes n bytes (at most the whole budget) from the budget,
// waiting until they are free or ctx ends. It returns the function that
// gives them back, or ctx's error.
func (b *byteBudget) acquire(ctx context.Context, n int64) (release func(), err error) {
	n = min(max(n, 1), b.total)
	b.mu.Lock()
	if len(b.queue) == 0 && b.used+n <= b.total {
		b.take(n)
		b.mu.Unlock()
		return func() { b.release(n) }, nil
	}
	w := &waiter{n: n, ready: make(chan struct{})}
	b.queue = append(b.queue, w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return func() { b.release(n) }, nil
	case <-ctx.Done():
		b.mu.Lock()
		defer b.mu.Unlock()
		select {
		case <-w.ready: // granted meanwhile: give the bytes back
			b.used -= n
			b.grant()
		default:
			for i, q := range b.queue {
				if q == w {
					b.queue = append(b.queue[:i], b.queue[i+1:]...)
					break
				}
			}
			b.grant() // w may have held up the others
		}
		return nil, ctx.Err()
	}
}

func (b *byteBudget) take(n int64) {
	b.used += n
	b.peak = max(b.peak, b.used)
}

func (b *byteBudget) release(n int64) {
	b.mu.Lock()
	b.used -= n
	b.grant()
	b.mu.Unlock()
}

// grant hands free bytes to the waiters at the head of the queue.
func (b *byteBudget) grant() {
	for len(b.queue) > 0 && b.used+b.queue[0].n <= b.total {
		w := b.queue[0]
		b.queue = b.queue[1:]
		b.take(w.n)
		close(w.ready)
	}
}

// peakUsed returns the most bytes ever in use at once.
func (b *byteBudget) peakUsed() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.peak
}
