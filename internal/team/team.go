// The team, its regions and the members' spin-then-park loops.

package team

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Spin bounds (see the package comment) and how many spins pass between two
// reads of the clock, each followed by a yield to the Go scheduler.
const (
	idleSpin   = 200 * time.Microsecond
	doneSpin   = 50 * time.Microsecond
	spinsCheck = 1024
)

// After a caller had to park for a member's item, the next regions run on
// goroutines started for them (spawn): on a machine whose cores are taken
// by other processes, a spinning member is often descheduled while it holds
// an item, and the caller then waits for the kernel to run it again
// (docs/perf/cpu-linear.md, v3.1). Started goroutines never hold an item
// before they run. How many: backoffMin regions after a park that comes
// alone (a vCPU preempted once: a quiet machine parks a few times a
// second), doubling up to backoffMax (about four decode steps of
// gocoder-23m) while parks follow within backoffRecent regions of the last
// backoff's end (a loaded machine parks at once again), v3.4.
const (
	backoffMin    = 16
	backoffMax    = 256
	backoffRecent = 256
)

// region is one parallel region: items run by whoever takes them next.
type region struct {
	fn     func(item int)
	items  int64
	limit  int // team members that may join (the caller is not one)
	next   atomic.Int64
	done   atomic.Int64
	parked atomic.Bool // the caller is parked, waiting for the last item
}

// run takes items until none is left and reports whether it finished the
// region's last one.
func (r *region) run() bool {
	last := false
	for {
		i := r.next.Add(1) - 1
		if i >= r.items {
			return last
		}
		r.fn(int(i))
		last = r.done.Add(1) == r.items
	}
}

// member is one persistent worker goroutine.
type member struct {
	id     int
	asleep atomic.Bool
	wake   chan struct{} // capacity 1: a token per wake-up
}

// The team: one process-wide, grown on demand, never shrunk (members park
// when idle).
var (
	mu      sync.Mutex // held by the caller of the running region
	gen     atomic.Uint64
	current atomic.Pointer[region]
	members []*member     // guarded by mu
	done    chan struct{} // capacity 1: wakes a parked caller
	backoff int           // regions left to spawn (guarded by mu)
	// The backoff's state (guarded by mu): the last backoff's length, and
	// the regions run on the team since it ended.
	lastBackoff  int
	sinceBackoff int
)

func init() { done = make(chan struct{}, 1) }

// Run calls fn(i) for every i in [0, items) on up to threads goroutines, the
// caller's included, and returns when all have returned. Items are taken in
// increasing order from a shared counter.
func Run(threads, items int, fn func(item int)) {
	workers := min(threads, items)
	if workers <= 1 {
		for i := range items {
			fn(i)
		}
		return
	}
	if !mu.TryLock() {
		spawn(workers, items, fn)
		return
	}
	defer mu.Unlock()
	if backoff > 0 {
		backoff--
		spawn(workers, items, fn)
		return
	}
	sinceBackoff++
	g := gen.Load()
	for len(members) < workers-1 {
		m := &member{id: len(members), wake: make(chan struct{}, 1)}
		members = append(members, m)
		go m.loop(g)
	}
	r := &region{fn: fn, items: int64(items), limit: workers - 1}
	current.Store(r)
	gen.Add(1)
	for _, m := range members[:r.limit] {
		if m.asleep.CompareAndSwap(true, false) {
			m.wake <- struct{}{}
		}
	}
	r.run()
	if waitDone(r) {
		backoff = nextBackoff(lastBackoff, sinceBackoff)
		lastBackoff, sinceBackoff = backoff, 0
	}
}

// nextBackoff returns how many regions to spawn after a park that came
// since regions after the end of a backoff of last regions (0: none yet).
func nextBackoff(last, since int) int {
	if last == 0 || since > backoffRecent {
		return backoffMin
	}
	return min(2*last, backoffMax)
}

// waitDone returns once every item of r has finished: spinning, then parked.
// It reports whether it parked.
func waitDone(r *region) bool {
	var start time.Time
	for spins := 1; r.done.Load() < r.items; spins++ {
		if spins%spinsCheck != 0 {
			continue
		}
		runtime.Gosched()
		if start.IsZero() {
			start = time.Now()
		} else if time.Since(start) > doneSpin {
			r.parked.Store(true)
			if r.done.Load() == r.items && r.parked.CompareAndSwap(true, false) {
				return true
			}
			<-done
			return true
		}
	}
	return false
}

// loop is a member's life: wait for a region newer than seen, join it if
// its limit takes this member, repeat.
func (m *member) loop(seen uint64) {
	for {
		seen = m.wait(seen)
		r := current.Load()
		if r == nil || m.id >= r.limit {
			continue
		}
		if r.run() && r.parked.CompareAndSwap(true, false) {
			done <- struct{}{}
		}
	}
}

// wait returns the region generation once it differs from seen: spinning
// for up to idleSpin, then parked until Run wakes the member.
func (m *member) wait(seen uint64) uint64 {
	var start time.Time
	for spins := 1; ; spins++ {
		if g := gen.Load(); g != seen {
			return g
		}
		if spins%spinsCheck != 0 {
			continue
		}
		runtime.Gosched()
		if start.IsZero() {
			start = time.Now()
			continue
		}
		if time.Since(start) <= idleSpin {
			continue
		}
		m.asleep.Store(true)
		if g := gen.Load(); g != seen && m.asleep.CompareAndSwap(true, false) {
			return g
		}
		<-m.wake
		start = time.Time{}
	}
}

// spawn runs a region on goroutines started for it (the team is busy).
func spawn(workers, items int, fn func(item int)) {
	r := &region{fn: fn, items: int64(items)}
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(func() { r.run() })
	}
	r.run()
	wg.Wait()
}
