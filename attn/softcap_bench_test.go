package attn

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/bitdecode/bitdecode/internal/cpufeat"
	"github.com/bitdecode/bitdecode/kv"
)

// BenchmarkDecodeSoftcap times one decode step (B = 1, L = 8192) of
// Gemma-2-9B's attention shape (16 query heads, 8 KV heads, D = 256)
// without a soft-cap and with Gemma 2's cap of 50, at each SIMD level the
// CPU runs (cpufeat.Force; named first): the cost of maskMax's pass of
// tanh over every score (softcapRow: the level's kernel, or Go loops
// around its vector exp). The two caps of a format run back to back.
//
//	go test -run '^$' -bench 'DecodeSoftcap/avx2' ./attn
func BenchmarkDecodeSoftcap(b *testing.B) {
	const l = 8192
	sh := Shape{Hq: 16, Hkv: 8, D: 256}
	for _, lvl := range cpufeat.Levels() {
		for _, spec := range []string{"fp16", "int8", "int4", "int2"} {
			f := kv.MustResolve(spec, sh.D)
			r := rand.New(rand.NewPCG(5, 6))
			var caches []*Cache
			var q, out []float32
			for _, c := range []float32{0, 50} {
				b.Run(fmt.Sprintf("%v/%s/cap=%g", lvl, spec, c), func(b *testing.B) {
					if caches == nil { // built once a format, only where the filter runs it
						caches, _, _ = buildBatch(b, r, f, sh, []int{l})
						q = randQ(r, sh.Hq*sh.D)
						out = make([]float32, len(q))
					}
					_, restore := cpufeat.Force(lvl)
					defer restore()
					p := Params{Format: f, Shape: sh, Tq: 1, Softcap: c}
					b.SetBytes(f.ReadBytes(l) * int64(sh.Hkv))
					for b.Loop() {
						if err := Decode(out, q, seqsOf(caches), p); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}

// BenchmarkSoftcapRow times softcapRow alone at each level (the AVX-512 or
// AVX2 kernel, else the Go loops around the level's expSub) on a row of
// 4096 scores of standard deviation 20 with Gemma 2's cap of 50, in L1:
// ns a score.
//
//	go test -run '^$' -bench SoftcapRow ./attn
func BenchmarkSoftcapRow(b *testing.B) {
	const n, c = 4096, 50
	r := rand.New(rand.NewPCG(7, 8))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(20 * r.NormFloat64())
	}
	row := make([]float32, n)
	for _, k := range levelSets() {
		b.Run(k.String(), func(b *testing.B) {
			w := newWorker(Params{Format: kv.MustResolve("fp16", 64), Shape: Shape{Hq: 1, Hkv: 1, D: 64}, Tq: 1, Softcap: c}, k)
			for b.Loop() {
				copy(row, x) // the scores afresh: a soft-cap of its own output would shrink them
				w.softcapRow(row)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/score")
		})
	}
}
