package cuda

import (
	"sort"
	"sync"
)

// spinSource keeps one thread busy until ns nanoseconds of the GPU's global
// timer have passed: MedianUS queues it before each timed region, so the
// host's launch calls (several microseconds each through the driver) happen
// while the GPU is still spinning, and the region's events bracket only GPU
// work. Without it a single small kernel's time includes its launch latency.
const spinSource = `
extern "C" __global__ void bd_spin(unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}
`

// spinNS is how long the spin kernel runs before each timed region: longer
// than the host takes to queue a region of a few launches.
const spinNS = 200_000

type spinState struct {
	once sync.Once
	fn   Function
	err  error
}

var spins sync.Map // *Device -> *spinState

// spin queues the spin kernel on s (compiled on first use).
func (c *Ctx) spin(s Stream) error {
	v, _ := spins.LoadOrStore(c.d, &spinState{})
	st := v.(*spinState)
	st.once.Do(func() {
		m, err := c.d.Compile(Program{Name: "spin.cu", Source: spinSource})
		if err != nil {
			st.err = err
			return
		}
		st.fn, st.err = c.Function(m, "bd_spin")
	})
	if st.err != nil {
		return st.err
	}
	return c.Launch(st.fn, Dim3{X: 1}, Dim3{X: 1}, 0, s, uint64(spinNS))
}

// MedianUS times step with a pair of events on stream s: warmups untimed
// runs, then runs timed ones, and returns the median in microseconds. Each
// run first queues a 200 us spin kernel, so the events measure the GPU time
// of step's work, not the host's launch latency (the way nvbench and
// Triton's do_bench time small kernels); each run is synchronized on its
// end event. step(i) gets the run index, so callers can rotate inputs. It
// must only queue work on s.
func (c *Ctx) MedianUS(s Stream, warmups, runs int, step func(i int) error) (float64, error) {
	return c.MedianUSPrep(s, warmups, runs, nil, step)
}

// MedianUSPrep is MedianUS with prep(i), when not nil, queued untimed on s
// before each run's start event (after the spin): for example a write that
// flushes L2, so that every run reads from DRAM.
func (c *Ctx) MedianUSPrep(s Stream, warmups, runs int, prep, step func(i int) error) (float64, error) {
	e0, err := c.NewEvent()
	if err != nil {
		return 0, err
	}
	defer c.DestroyEvent(e0)
	e1, err := c.NewEvent()
	if err != nil {
		return 0, err
	}
	defer c.DestroyEvent(e1)
	times := make([]float64, 0, runs)
	for i := 0; i < warmups+runs; i++ {
		if err := c.spin(s); err != nil {
			return 0, err
		}
		if prep != nil {
			if err := prep(i); err != nil {
				return 0, err
			}
		}
		if err := c.Record(e0, s); err != nil {
			return 0, err
		}
		if err := step(i); err != nil {
			return 0, err
		}
		if err := c.Record(e1, s); err != nil {
			return 0, err
		}
		if err := c.SyncEvent(e1); err != nil {
			return 0, err
		}
		ms, err := c.ElapsedMS(e0, e1)
		if err != nil {
			return 0, err
		}
		if i >= warmups {
			times = append(times, float64(ms)*1e3)
		}
	}
	if len(times) == 0 {
		return 0, nil
	}
	sort.Float64s(times)
	return times[len(times)/2], nil
}
