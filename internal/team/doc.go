// Package team runs the work items of a parallel region (one op of the CPU
// kernels: a Linear, a decode attention call) on a persistent team of
// goroutines that wait for the next region by spinning, for a bounded time,
// instead of being started and parked for every region.
//
// Why: a decode step of a small model is ~60 regions of a few to a hundred
// microseconds each (gocoder-23m's q/o GEMVs stream 512 KiB, ~20 µs). A
// goroutine started per region runs on another core only once that core's
// thread is woken (a futex, and on a VM an idle vCPU's halt exit: tens of
// µs), so the caller did about three quarters of every GEMV's items itself
// (docs/perf/cpu-linear.md, v3). A worker that spins between regions takes
// its first item within a fraction of a microsecond.
//
// Bounds, so a shared machine is not hurt: an idle worker spins at most
// idleSpin before it parks on a channel (the next region wakes it), and a
// caller waiting for another worker's last item spins at most doneSpin
// before it parks too, giving its core to that worker if the kernel had
// descheduled it. Spinning goroutines yield to the Go scheduler about every
// microsecond, so other goroutines on their P still run.
//
// One region runs at a time. A region started while another is running
// (from another goroutine, or from inside an item) runs on goroutines of
// its own, started for it, as before the team existed. Which goroutine runs
// an item never changes what the item computes: callers keep their results
// independent of the thread count.
package team
