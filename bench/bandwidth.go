package bench

import (
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/bitdecode/bitdecode/internal/cpufeat"
)

// ReadBandwidth measures this machine's read bandwidth in GB/s (1e9 bytes
// per second): threads goroutines (0: GOMAXPROCS) each read their share of
// a buffer of sizeBytes (far larger than the caches) with the widest loads
// the CPU has (readSum: eight independent 64-byte loads per step with
// AVX-512, 32-byte with AVX2, 8-byte words in pure Go), and the fastest of
// reps passes after one warm-up pass is reported. The fastest, not the
// median: other processes on a shared machine only ever slow a pass down,
// so the best pass is the closest to what the memory system can deliver,
// and a decode rate measured against it is not flattered.
func ReadBandwidth(sizeBytes int, threads, reps int) float64 {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	if reps <= 0 {
		reps = 1
	}
	buf := make([]uint64, sizeBytes/8)
	for i := range buf {
		buf[i] = uint64(i) * 0x9e3779b97f4a7c15
	}
	// Whole 512-byte steps per thread, so every kernel reads the same bytes.
	chunk := len(buf) / threads / readStepWords * readStepWords
	var sink uint64
	var mu sync.Mutex
	pass := func() time.Duration {
		start := time.Now()
		var wg sync.WaitGroup
		for t := 0; t < threads; t++ {
			s := buf[t*chunk : (t+1)*chunk]
			wg.Go(func() {
				x := readSum(s)
				mu.Lock()
				sink += x
				mu.Unlock()
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	pass()
	times := make([]time.Duration, reps)
	for i := range times {
		times[i] = pass()
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	runtime.KeepAlive(sink)
	return float64(threads*chunk*8) / times[0].Seconds() / 1e9
}

// readStepWords is the words one step of the assembly read loops covers
// (512 bytes: eight zmm or sixteen ymm loads).
const readStepWords = 64

// readSumGo is the pure-Go read loop: 8-byte words, four accumulators.
func readSumGo(s []uint64) uint64 {
	var a, b, c, d uint64
	for i := 0; i+4 <= len(s); i += 4 {
		a += s[i]
		b += s[i+1]
		c += s[i+2]
		d += s[i+3]
	}
	return a ^ b ^ c ^ d
}

// readLevel returns the SIMD level the read probe runs at.
func readLevel() cpufeat.Level { return cpufeat.Active() }
