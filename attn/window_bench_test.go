package attn

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/bitdecode/bitdecode/kv"
)

// BenchmarkDecodeWindow times one decode step (B = 1, L = 16384) of
// Mistral-7B's attention shape (32 query heads, 8 KV heads, D = 128)
// without a window and with Mistral v0.1's window of 4096 tokens: the
// windowed step reads a quarter of the blocks. The bytes/s metric counts
// the whole sequence's read, so the windowed rows read as a multiple of
// the full ones.
//
//	go test -run '^$' -bench DecodeWindow ./attn
func BenchmarkDecodeWindow(b *testing.B) {
	const l = 16384
	sh := Shape{Hq: 32, Hkv: 8, D: 128}
	for _, spec := range []string{"fp16", "int4"} {
		f := kv.MustResolve(spec, sh.D)
		r := rand.New(rand.NewPCG(3, 4))
		caches, _, _ := buildBatch(b, r, f, sh, []int{l})
		q := randQ(r, sh.Hq*sh.D)
		out := make([]float32, len(q))
		for _, w := range []int{0, 4096} {
			b.Run(fmt.Sprintf("%s/W=%d", spec, w), func(b *testing.B) {
				p := Params{Format: f, Shape: sh, Tq: 1, Window: w}
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
