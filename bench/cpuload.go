package bench

import "math"

// otherCores returns the cores' worth of CPU time that other processes
// (and the hypervisor's steal) took between two samples over wall seconds:
// the machine's busy time less this process's, over the wall time; NaN
// where either sample failed. /proc/stat counts in 10 ms ticks, so over a
// 0.3 s row it resolves ~0.05 of a core.
func otherCores(a, b cpuSample, wall float64) float64 {
	if !a.ok || !b.ok || wall <= 0 {
		return math.NaN()
	}
	return max(0, (b.busy-a.busy)-(b.self-a.self)) / wall
}

// BusyOtherCores is the other processes' share (OtherCores) from which a
// CPU row is listed under the table as timed beside other work: on the
// 2-core VM, int2 at (1, 32K) read 2x its cycles a pair (62 against 31)
// beside one busy loop, both threads' items then mostly on one core
// (docs/perf/cpu-attention.md, round 20).
const BusyOtherCores = 0.25
