package kvcache

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bitdecode/bitdecode/attn"
	"github.com/bitdecode/bitdecode/kv"
)

// TestParamsLoseNothing measures what the 16-bit (scale, zero) pairs cost
// against the same quantization with float32 parameters (the ":ref"
// reference format), on keys that carry per-channel offsets of 10 to 300
// times their spread (as models with large k_proj biases have): the mean
// attention error of int4 KC128 and int2 KC128 against float64 attention on
// the unquantized values must be within 10% of the reference's. Keys
// reach the cache as fp16, so a group's minimum is an fp16 value and the
// fp16 zero is exact; the fp16 scale's rounding is what remains.
func TestParamsLoseNothing(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 7))
	sh := attn.Shape{Hq: 8, Hkv: 2, D: 128}
	const n = 1024 + 37
	m := sh.Hkv * sh.D
	off := make([]float64, m)
	for i := range off {
		off[i] = (10 + 290*r.Float64()) * float64(1-2*r.IntN(2))
	}
	k, v := make([]float32, n*m), make([]float32, n*m)
	for i := range k {
		k[i] = float32(off[i%m] + r.NormFloat64())
		v[i] = float32(r.NormFloat64())
	}
	q := make([]float32, sh.Hq*sh.D)
	for i := range q {
		q[i] = float32(r.NormFloat64() * 0.02) // keys of norm ~2000: scores of a few units
	}
	errOf := func(spec string) float64 {
		f := kv.MustResolve(spec, sh.D)
		c, err := attn.NewCache(f, sh)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Append(k, v); err != nil {
			t.Fatal(err)
		}
		got := make([]float32, len(q))
		if err := attn.Decode(got, q, []*attn.Seq{&c.Seq}, attn.Params{Format: f, Shape: sh, Tq: 1}); err != nil {
			t.Fatal(err)
		}
		// float64 attention over the unquantized keys and values.
		var sum float64
		g := sh.Group()
		for h := 0; h < sh.Hq; h++ {
			kh := h / g
			scores := make([]float64, n)
			mx := math.Inf(-1)
			for tk := 0; tk < n; tk++ {
				var s float64
				for d := 0; d < sh.D; d++ {
					s += float64(q[h*sh.D+d]) * float64(k[(tk*sh.Hkv+kh)*sh.D+d])
				}
				scores[tk] = s / math.Sqrt(float64(sh.D))
				mx = math.Max(mx, scores[tk])
			}
			var den float64
			for tk := range scores {
				scores[tk] = math.Exp(scores[tk] - mx)
				den += scores[tk]
			}
			for d := 0; d < sh.D; d++ {
				var o float64
				for tk := 0; tk < n; tk++ {
					o += scores[tk] * float64(v[(tk*sh.Hkv+kh)*sh.D+d])
				}
				sum += math.Abs(o/den - float64(got[h*sh.D+d]))
			}
		}
		return sum / float64(len(q))
	}
	for _, spec := range []string{"int4:kc128:v128", "int2:kc128:v128"} {
		stored, ref := errOf(spec), errOf(spec+":ref")
		t.Logf("%s: mean |attention error| %.5f with fp16 scales and zeros, %.5f with float32 ones (%.3fx)", spec, stored, ref, stored/ref)
		if stored > 1.1*ref {
			t.Errorf("%s: the fp16 parameters cost %.1f%% more attention error than float32 ones, want at most 10%%", spec, 100*(stored/ref-1))
		}
	}
}
