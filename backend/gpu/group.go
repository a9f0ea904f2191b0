// group.go: tensor-parallel groups on the GPUs of one host. OpenGroup opens
// one Backend per GPU and an NCCL communicator between them; the group's
// AllReduce queues ncclAllReduce (in place, float32 sum) on every rank's op
// queue, keyed like a kernel so that a decode step with all-reduces is still
// captured and replayed as CUDA graphs.
//
// Nothing waits for a peer that its caller has not fed. The ranks' queues
// are fed by one goroutine (backend/tp issues rank 0's ops, then rank 1's),
// so a queued collective on rank 0 may have its partners still in the other
// ranks' queues. Hence, while a collective is queued anywhere, any flush of
// any rank first hands every rank's queue to its owner thread, all at once
// (one goroutine a rank: NCCL's host calls, which may wait for the peers'
// calls, then run concurrently), and only then does the caller wait.
//
// Nothing hangs. A grouped rank never waits for its stream without a bound:
// it polls cuStreamQuery and the communicator's asynchronous error; a failed
// op, an NCCL error, a lost GPU or a wait longer than the timeout (60 s by
// default, Options.CollectiveTimeout) fails the group: every rank records
// the error (naming the rank), the communicators are aborted (which ends
// kernels that wait for a peer), and AllReduce refuses further work.

package gpu

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/gpu/cuda"
)

// Waits of a grouped rank for its stream.
const (
	// defaultCollectiveTimeout bounds one wait for a rank's stream when
	// Options.CollectiveTimeout is 0.
	defaultCollectiveTimeout = 60 * time.Second
	// groupSpin is how long a wait polls the stream without sleeping: a
	// decode step's Download waits a few milliseconds, and a sleep would
	// add its granularity to every step.
	groupSpin = 20 * time.Millisecond
	// groupSleep is the pause between polls after groupSpin.
	groupSleep = 100 * time.Microsecond
	// abortGrace is how long a wait still lets a failed group's streams
	// drain (aborted NCCL kernels return) before it gives up on them.
	abortGrace = 10 * time.Second
)

// group is the Communicator of a tensor-parallel group: its ranks, one
// NCCL communicator each, and its failure state.
type group struct {
	ranks   []*Backend
	comms   []*cuda.Comm
	timeout time.Duration

	// mu orders AllReduce's queueing against flushRanks's taking of the
	// queues, so that a collective is queued on every rank or on none.
	mu sync.Mutex
	// pending: a collective is queued on the ranks, not yet handed to their
	// owner threads.
	pending atomic.Bool
	closed  bool // under mu

	errMu    sync.Mutex
	err      error     // the first failure; the group is unusable after it
	failedAt time.Time // when err was set
	aborted  chan struct{}
}

var _ backend.Communicator = (*group)(nil)

// OpenGroup opens n backends on GPUs 0..n-1 with the options o and an NCCL
// communicator between them (tensor parallelism, backend/tp). Each rank's
// communicator is made on that GPU's owner thread, all at once, and one
// warm-up all-reduce runs on every rank before it returns. With fewer GPUs
// than n the error says so ("--tp 2 needs 2 GPUs; this machine has 1");
// without NCCL it wraps cuda.ErrNoNCCL and says what to install. Close the
// communicator before the ranks.
func OpenGroup(n int, o Options) ([]*Backend, backend.Communicator, error) {
	if n < 1 {
		return nil, nil, fmt.Errorf("backend/gpu: tensor-parallel group of %d ranks: want at least 1", n)
	}
	if o.CollectiveTimeout < 0 {
		return nil, nil, fmt.Errorf("backend/gpu: Options.CollectiveTimeout %v: want 0 (the default, %v) or more", o.CollectiveTimeout, defaultCollectiveTimeout)
	}
	timeout := o.CollectiveTimeout
	if timeout == 0 {
		timeout = defaultCollectiveTimeout
	}
	if o.CUDA != nil {
		if err := cuda.Configure(*o.CUDA); err != nil {
			return nil, nil, fmt.Errorf("backend/gpu: %w", err)
		}
	}
	have, err := cuda.DeviceCount()
	if err != nil {
		return nil, nil, fmt.Errorf("backend/gpu: %w", err)
	}
	if have < n {
		return nil, nil, fmt.Errorf("backend/gpu: --tp %d needs %d GPUs; this machine has %d", n, n, have)
	}
	if _, err := cuda.NCCLVersion(); err != nil {
		return nil, nil, fmt.Errorf("backend/gpu: --tp %d: %w", n, err)
	}

	ranks := make([]*Backend, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range ranks {
		wg.Go(func() { ranks[r], errs[r] = Open(r, o) })
	}
	wg.Wait()
	closeAll := func() {
		for _, b := range ranks {
			if b != nil {
				b.Close()
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		closeAll()
		return nil, nil, err
	}

	id, err := cuda.NewNCCLUniqueID()
	if err != nil {
		closeAll()
		return nil, nil, fmt.Errorf("backend/gpu: %w", err)
	}
	// ncclCommInitRank returns once every rank has called it: one
	// goroutine a rank, each on its GPU's owner thread.
	comms := make([]*cuda.Comm, n)
	done := make(chan struct{})
	go func() {
		var wg sync.WaitGroup
		for r, b := range ranks {
			wg.Go(func() {
				errs[r] = b.dev.Do(func(c *cuda.Ctx) error {
					var err error
					comms[r], err = c.NCCLInit(id, n, r)
					return err
				})
			})
		}
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(timeout):
		// The owner threads are stuck in NCCL: the ranks cannot be closed.
		return nil, nil, fmt.Errorf("backend/gpu: --tp %d: NCCL's communicators were not made within %v (ncclCommInitRank waits for every rank); the GPUs are left open", n, timeout)
	}
	if err := errors.Join(errs...); err != nil {
		for _, m := range comms {
			if m != nil {
				m.Abort()
			}
		}
		closeAll()
		return nil, nil, fmt.Errorf("backend/gpu: --tp %d: %w", n, err)
	}

	g := &group{ranks: ranks, comms: comms, timeout: timeout, aborted: make(chan struct{})}
	for r, b := range ranks {
		b.group, b.rank = g, r
	}
	if err := g.warmUp(); err != nil {
		g.Close()
		closeAll()
		return nil, nil, fmt.Errorf("backend/gpu: --tp %d: warm-up all-reduce: %w", n, err)
	}
	return ranks, g, nil
}

// warmUp runs one all-reduce on every rank at once and checks its sum, so
// that NCCL's lazy setup (connections, buffers) is done before a decode
// step's first all-reduce.
func (g *group) warmUp() error {
	parts := make([]backend.Tensor, len(g.ranks))
	for r, b := range g.ranks {
		t, err := b.Alloc(backend.F32, 1)
		if err != nil {
			return err
		}
		defer b.Free(t)
		if err := b.Upload(t, []float32{float32(r + 1)}); err != nil {
			return err
		}
		parts[r] = t
	}
	if err := g.AllReduce(parts); err != nil {
		return err
	}
	want := float32(len(g.ranks) * (len(g.ranks) + 1) / 2)
	for r, b := range g.ranks {
		got := []float32{0}
		if err := b.Download(got, parts[r]); err != nil {
			return err
		}
		if got[0] != want {
			return fmt.Errorf("rank %d: sum %g, want %g", r, got[0], want)
		}
	}
	return nil
}

// Ranks implements backend.Communicator.
func (g *group) Ranks() int { return len(g.ranks) }

// AllReduce implements backend.Communicator: it queues ncclAllReduce on
// every rank's op queue (in place, float32 sum), keyed by the tensor's
// address and size and the communicator, so that graphs capture it.
func (g *group) AllReduce(parts []backend.Tensor) error {
	const op = "AllReduce"
	if err := g.Err(); err != nil {
		return fmt.Errorf("backend/gpu: all-reduce: the group failed earlier: %w", err)
	}
	if len(parts) != len(g.ranks) {
		return fmt.Errorf("backend/gpu: all-reduce of %d parts over %d ranks", len(parts), len(g.ranks))
	}
	cts := make([]*tensor, len(parts))
	for r, p := range parts {
		ct, err := g.ranks[r].tensorOf(op, p)
		if err != nil {
			return fmt.Errorf("backend/gpu: all-reduce: rank %d's part: %w", r, err)
		}
		if ct.dtype != backend.F32 {
			return fmt.Errorf("backend/gpu: all-reduce: rank %d's part is %v; want F32", r, ct)
		}
		if r > 0 && !slices.Equal(ct.shape, cts[0].shape) {
			return fmt.Errorf("backend/gpu: all-reduce: rank %d's part is %v, rank 0's %v", r, ct, cts[0])
		}
		cts[r] = ct
	}
	if cts[0].n == 0 {
		return nil
	}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return errors.New("backend/gpu: all-reduce on a closed communicator")
	}
	full := false
	for r, b := range g.ranks {
		ct, comm := cts[r], g.comms[r]
		b.qMu.Lock()
		if b.queue == nil {
			b.queue, b.spare = b.spare, nil
		}
		b.queue = append(b.queue, queuedOp{op: op, f: func(c *cuda.Ctx) error {
			if err := c.AllReduceSumF32(comm, ct.ptr, ct.n, b.stream); err != nil {
				return fmt.Errorf("rank %d of %d (GPU %d): %w", r, len(g.ranks), b.dev.Ordinal(), err)
			}
			return nil
		}, key: []uint64{u64(ct.ptr), u64(ct.n), uint64(comm.Handle())}})
		full = full || len(b.queue)+b.qFolds >= segmentOps
		b.qMu.Unlock()
	}
	g.pending.Store(true)
	g.mu.Unlock()
	if full {
		g.flushRanks()
	}
	return nil
}

// flushRanks hands every rank's queue to its owner thread, all at once, and
// waits until each has been run (launched or replayed, not finished).
func (g *group) flushRanks() {
	g.mu.Lock()
	queues := make([][]queuedOp, len(g.ranks))
	for r, b := range g.ranks {
		queues[r] = b.takeQueue()
	}
	g.pending.Store(false)
	g.mu.Unlock()
	var wg sync.WaitGroup
	for r, b := range g.ranks {
		if len(queues[r]) > 0 {
			wg.Go(func() { b.runQueue(queues[r], nil) })
		}
	}
	wg.Wait()
}

// Err returns the group's failure, nil while it is healthy.
func (g *group) Err() error {
	g.errMu.Lock()
	defer g.errMu.Unlock()
	return g.err
}

// fail records the group's first failure on every rank and aborts the
// communicators (in the background: an abort may wait for a lost GPU).
func (g *group) fail(err error) {
	g.errMu.Lock()
	if g.err != nil {
		g.errMu.Unlock()
		return
	}
	g.err, g.failedAt = err, time.Now()
	g.errMu.Unlock()
	for _, b := range g.ranks {
		b.fail(err)
	}
	go func() {
		var wg sync.WaitGroup
		for _, m := range g.comms {
			wg.Go(func() { m.Abort() })
		}
		wg.Wait()
		close(g.aborted)
	}()
}

// wait waits, on rank's owner thread, until rank's stream has finished,
// polling it (see the file comment): it fails the group on a device error,
// an NCCL error or a wait beyond the timeout, and returns that error.
func (g *group) wait(c *cuda.Ctx, rank int, s cuda.Stream) error {
	b := g.ranks[rank]
	who := func() string { return fmt.Sprintf("rank %d of %d (GPU %d)", rank, len(g.ranks), b.dev.Ordinal()) }
	start := time.Now()
	for {
		done, err := c.StreamDone(s)
		if err != nil {
			err = fmt.Errorf("backend/gpu: %s: %w", who(), err)
			g.fail(err)
			return err
		}
		if done {
			return nil
		}
		if err := g.comms[rank].AsyncError(); err != nil {
			err = fmt.Errorf("backend/gpu: %s: NCCL: %w", who(), err)
			g.fail(err)
			return err
		}
		now := time.Now()
		g.errMu.Lock()
		gerr, failedAt := g.err, g.failedAt
		g.errMu.Unlock()
		switch {
		case gerr != nil && now.Sub(failedAt) > abortGrace:
			return fmt.Errorf("backend/gpu: %s: the stream did not drain within %v of the group's failure: %w", who(), abortGrace, gerr)
		case gerr == nil && now.Sub(start) > g.timeout:
			err := fmt.Errorf("backend/gpu: %s: the stream did not finish within %v (an all-reduce waiting for a peer?); NCCL communicators aborted", who(), g.timeout)
			g.fail(err)
			return err
		}
		if now.Sub(start) > groupSpin {
			time.Sleep(groupSleep)
		}
	}
}

// Close implements backend.Communicator: it runs the queued ops, waits for
// every rank's stream, drops the ranks' CUDA graphs (which hold the
// collectives) and destroys the communicators (on the owner threads, all at
// once). After a failure the communicators are already aborted.
func (g *group) Close() error {
	g.flushRanks()
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	g.mu.Unlock()
	if g.Err() != nil {
		select {
		case <-g.aborted:
		case <-time.After(abortGrace):
		}
		return nil
	}
	// ncclCommDestroy waits until no CUDA graph holds the communicator's
	// collectives: the ranks' graphs go first (recaptured if needed).
	errs := make([]error, len(g.ranks))
	done := make(chan struct{})
	go func() {
		var wg sync.WaitGroup
		for r, b := range g.ranks {
			wg.Go(func() {
				errs[r] = b.dev.Do(func(c *cuda.Ctx) error {
					if err := g.wait(c, r, b.stream); err != nil {
						return err
					}
					b.graphs.reset(c)
					return c.NCCLDestroy(g.comms[r])
				})
			})
		}
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(g.timeout):
		return fmt.Errorf("backend/gpu: closing the NCCL communicators: ncclCommDestroy did not return within %v; the ranks' owner threads are stuck in it", g.timeout)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("backend/gpu: closing the NCCL communicators: %w", err)
	}
	return nil
}
