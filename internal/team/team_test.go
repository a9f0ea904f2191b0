package team

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// runCounts runs a region and returns how many times each item ran.
func runCounts(threads, items int) []int32 {
	counts := make([]int32, items)
	Run(threads, items, func(i int) { atomic.AddInt32(&counts[i], 1) })
	return counts
}

func checkOnce(t *testing.T, what string, counts []int32) {
	t.Helper()
	for i, c := range counts {
		if c != 1 {
			t.Fatalf("%s: item %d ran %d times, want 1", what, i, c)
		}
	}
}

// TestRunEveryItemOnce: every item runs exactly once whatever the thread
// and item counts, and Run returns only after the last one finished (its
// writes are visible to the caller).
func TestRunEveryItemOnce(t *testing.T) {
	for _, threads := range []int{0, 1, 2, 3, 8} {
		for _, items := range []int{0, 1, 2, 3, 7, 64, 1000} {
			checkOnce(t, "run", runCounts(threads, items))
		}
	}
}

// TestRunParksAndWakes: regions separated by more than the idle spin find
// the members parked and wake them.
func TestRunParksAndWakes(t *testing.T) {
	rounds := 5
	if testing.Short() {
		rounds = 2
	}
	for range rounds {
		mu.Lock()
		backoff = 0 // the team itself, not started goroutines
		mu.Unlock()
		checkOnce(t, "after idle", runCounts(4, 16))
		time.Sleep(2 * idleSpin)
	}
}

// TestRunSlowItemParksCaller: a member's item outlasting the caller's
// spin makes the caller park; it is woken when the item ends, and the
// regions after it run on started goroutines (backoff), still correctly.
func TestRunSlowItemParksCaller(t *testing.T) {
	var ran atomic.Int32
	Run(2, 2, func(i int) {
		if i == 1 {
			time.Sleep(4 * doneSpin)
		}
		ran.Add(1)
	})
	if got := ran.Load(); got != 2 {
		t.Fatalf("%d items ran before Run returned, want 2", got)
	}
	checkOnce(t, "after a park", runCounts(2, 40))
}

// TestRunNestedAndConcurrent: a region started from inside an item, or
// from several goroutines at once, runs on goroutines of its own and still
// runs every item once.
func TestRunNestedAndConcurrent(t *testing.T) {
	const outer, inner = 6, 5
	counts := make([]int32, outer*inner)
	Run(3, outer, func(i int) {
		Run(2, inner, func(j int) { atomic.AddInt32(&counts[i*inner+j], 1) })
	})
	checkOnce(t, "nested", counts)

	var wg sync.WaitGroup
	res := make([][]int32, 8)
	for g := range res {
		wg.Go(func() {
			for range 20 {
				res[g] = runCounts(2, 33)
				for i, c := range res[g] {
					if c != 1 {
						t.Errorf("concurrent: item %d ran %d times", i, c)
						return
					}
				}
			}
		})
	}
	wg.Wait()
}

// TestRunOneProc: with one P the spinning members yield, so regions still
// finish.
func TestRunOneProc(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for range 50 {
		checkOnce(t, "one P", runCounts(3, 9))
	}
}

// TestNextBackoff: a park that comes alone spawns backoffMin regions; parks
// that follow within backoffRecent regions of the last backoff's end double
// it up to backoffMax; a park after a longer clean run starts again at
// backoffMin.
func TestNextBackoff(t *testing.T) {
	last, want := 0, backoffMin
	for range 8 { // a loaded machine: every park right after the backoff
		if got := nextBackoff(last, 3); got != want {
			t.Fatalf("park 3 regions after a backoff of %d: %d regions, want %d", last, got, want)
		}
		last, want = want, min(2*want, backoffMax)
	}
	if last != backoffMax {
		t.Fatalf("the backoff reached %d, want %d", last, backoffMax)
	}
	if got := nextBackoff(backoffMax, backoffRecent+1); got != backoffMin {
		t.Fatalf("a park %d regions after the last backoff: %d regions, want %d", backoffRecent+1, got, backoffMin)
	}
}
