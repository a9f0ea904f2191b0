package attn

import (
	"math/rand/v2"
	"os"
	"testing"

	"github.com/bitdecode/bitdecode/kv"
)

func BenchmarkZZ(b *testing.B) {
	spec := os.Getenv("ZZSPEC")
	sh := Shape{Hq: 32, Hkv: 8, D: 128}
	f := kv.MustResolve(spec, 128)
	r := rand.New(rand.NewPCG(1, 2))
	g := newKVGen(r, 8, 128)
	k, v := g.tokens(32768)
	c, _ := NewCache(f, sh)
	c.Append(k, v)
	q := randQ(r, 32*128)
	out := make([]float32, len(q))
	p := Params{Format: f, Shape: sh, Tq: 1}
	b.ResetTimer()
	for range b.N {
		Decode(out, q, []*Seq{&c.Seq}, p)
	}
}
