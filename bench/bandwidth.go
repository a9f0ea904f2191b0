package bench

import (
	"runtime"
	"sort"
	"sync"
	"time"
)

// ReadBandwidth measures this machine's read bandwidth in GB/s (1e9 bytes
// per second): threads goroutines each sum their share of a buffer of
// sizeBytes (far larger than the caches), median of reps passes after one
// warm-up pass. The loop reads 8-byte words with four accumulators, the
// shape of the attention inner loops.
func ReadBandwidth(sizeBytes int, threads, reps int) float64 {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	buf := make([]uint64, sizeBytes/8)
	for i := range buf {
		buf[i] = uint64(i) * 0x9e3779b97f4a7c15
	}
	chunk := (len(buf) + threads - 1) / threads
	var sink uint64
	var mu sync.Mutex
	pass := func() time.Duration {
		start := time.Now()
		var wg sync.WaitGroup
		for t := 0; t < threads; t++ {
			lo, hi := t*chunk, min((t+1)*chunk, len(buf))
			wg.Add(1)
			go func() {
				defer wg.Done()
				var a, b, c, d uint64
				s := buf[lo:hi]
				i := 0
				for ; i+4 <= len(s); i += 4 {
					a += s[i]
					b += s[i+1]
					c += s[i+2]
					d += s[i+3]
				}
				mu.Lock()
				sink += a + b + c + d
				mu.Unlock()
			}()
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
	return float64(len(buf)*8) / times[len(times)/2].Seconds() / 1e9
}
