package attn

import (
	"fmt"
	"math"
	"runtime"
	"sync"
)

// DecodeF32 is the plain float32 attention over an unquantized float32 cache
// (keys and vals per sequence, [L][Hkv][D]): the CPU baseline that the
// quantized formats are compared against. It is parallel over sequences and
// KV heads and shares the GQA group's reads of K and V like Decode.
func DecodeF32(out, q []float32, keys, vals [][]float32, sh Shape, tq int, scale float32) error {
	if err := sh.Validate(); err != nil {
		return err
	}
	d, g := sh.D, sh.Group()
	if n := len(keys) * tq * sh.Hq * d; len(q) != n || len(out) != n || len(vals) != len(keys) {
		return fmt.Errorf("attn: DecodeF32: q %d, out %d values; want %d", len(q), len(out), n)
	}
	for b := range keys {
		if n := len(keys[b]) / (sh.Hkv * d); n < tq || len(vals[b]) != len(keys[b]) {
			return fmt.Errorf("attn: DecodeF32: sequence %d holds %d tokens (K %d, V %d values), want >= Tq=%d", b, n, len(keys[b]), len(vals[b]), tq)
		}
	}
	if scale == 0 {
		scale = float32(1 / math.Sqrt(float64(d)))
	}
	type job struct{ b, h int }
	jobs := make(chan job)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := g * tq
			qs := make([]float32, r*d)
			acc := make([]float32, r*d)
			m, l, sc := make([]float32, r), make([]float32, r), make([]float32, r)
			for jb := range jobs {
				b, h := jb.b, jb.h
				n := len(keys[b]) / (sh.Hkv * d)
				for row := 0; row < r; row++ {
					off := ((b*tq+row/g)*sh.Hq + h*g + row%g) * d
					for c := 0; c < d; c++ {
						qs[row*d+c] = q[off+c] * scale
					}
					m[row], l[row] = float32(math.Inf(-1)), 0
				}
				clear(acc)
				for t := 0; t < n; t++ {
					k := keys[b][(t*sh.Hkv+h)*d : (t*sh.Hkv+h+1)*d]
					v := vals[b][(t*sh.Hkv+h)*d : (t*sh.Hkv+h+1)*d]
					for row := 0; row < r; row++ {
						if t > n-tq+row/g {
							sc[row] = float32(math.Inf(-1))
							continue
						}
						sc[row] = dot(qs[row*d:(row+1)*d], k)
					}
					for row := 0; row < r; row++ {
						s := sc[row]
						if math.IsInf(float64(s), -1) {
							continue
						}
						if s > m[row] {
							a := float32(math.Exp(float64(m[row] - s)))
							l[row] *= a
							for c := range acc[row*d : (row+1)*d] {
								acc[row*d+c] *= a
							}
							m[row] = s
						}
						e := float32(math.Exp(float64(s - m[row])))
						l[row] += e
						axpy(acc[row*d:(row+1)*d], e, v)
					}
				}
				for row := 0; row < r; row++ {
					off := ((b*tq+row/g)*sh.Hq + h*g + row%g) * d
					for c := 0; c < d; c++ {
						out[off+c] = acc[row*d+c] / l[row]
					}
				}
			}
		}()
	}
	for b := range keys {
		for h := 0; h < sh.Hkv; h++ {
			jobs <- job{b, h}
		}
	}
	close(jobs)
	wg.Wait()
	return nil
}
