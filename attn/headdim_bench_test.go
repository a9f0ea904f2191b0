package attn

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/bitdecode/bitdecode/kv"
)

// BenchmarkDecodeHeadDim times one decode step (B = 1, L = 4096) of
// Phi-3-mini's attention shape (32 query and 32 KV heads) at its head dim
// 96 and at 128, per format: D = 96 runs the paths a head dim that is not
// a multiple of 64 takes (no four-row integer score kernels, no integer
// PV), D = 128 the full SIMD set. The bytes/element metric is the
// cache's read per step over the time.
//
//	go test -run '^$' -bench DecodeHeadDim ./attn
func BenchmarkDecodeHeadDim(b *testing.B) {
	const l = 4096
	for _, spec := range []string{"fp16", "int8", "int4", "int2"} {
		for _, d := range []int{96, 128} {
			b.Run(fmt.Sprintf("%s/D=%d", spec, d), func(b *testing.B) {
				sh := Shape{Hq: 32, Hkv: 32, D: d}
				f := kv.MustResolve(spec, d)
				r := rand.New(rand.NewPCG(1, uint64(d)))
				caches, _, _ := buildBatch(b, r, f, sh, []int{l})
				p := Params{Format: f, Shape: sh, Tq: 1}
				q := randQ(r, sh.Hq*d)
				out := make([]float32, len(q))
				b.SetBytes(f.ReadBytes(l) * int64(sh.Hkv))
				b.ResetTimer()
				for b.Loop() {
					if err := Decode(out, q, seqsOf(caches), p); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
