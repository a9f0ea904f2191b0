package attn

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/bitdecode/bitdecode/kv"
)

// BenchmarkDecodeSoftcap times one decode step (B = 1, L = 8192) of
// Gemma-2-9B's attention shape (16 query heads, 8 KV heads, D = 256)
// without a soft-cap and with Gemma 2's cap of 50: the cost of maskMax's
// pass of tanh32 over every score (one exp32 and a division a score,
// pure Go).
//
//	go test -run '^$' -bench DecodeSoftcap ./attn
func BenchmarkDecodeSoftcap(b *testing.B) {
	const l = 8192
	sh := Shape{Hq: 16, Hkv: 8, D: 256}
	for _, spec := range []string{"fp16", "int8", "int4", "int2"} {
		f := kv.MustResolve(spec, sh.D)
		r := rand.New(rand.NewPCG(5, 6))
		caches, _, _ := buildBatch(b, r, f, sh, []int{l})
		q := randQ(r, sh.Hq*sh.D)
		out := make([]float32, len(q))
		for _, c := range []float32{0, 50} {
			b.Run(fmt.Sprintf("%s/cap=%g", spec, c), func(b *testing.B) {
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
