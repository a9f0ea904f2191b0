package attn

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bitdecode/bitdecode/kv"
)

// TestQueryQuantVsFormatError compares, on realistic keys (outlier
// channels x10-x50) and random queries, the score error that quantizing
// the query to int8 (15 bits for int8 keys) adds on the VNNI path with the score error of the KV
// format itself (the keys' quantization), both measured against float64
// scores: q·k̂ with the int8 query vs q·k̂ exact (the query's share), and
// q·k̂ vs q·k on the unquantized keys (the format's share). The query's
// share must stay below the format's for every integer key format the
// VNNI path serves: by its RMS over all scores, and by its largest value
// against the format's largest. The numbers are in docs/perf/cpu-attention.md.
func TestQueryQuantVsFormatError(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	sh := Shape{Hq: 8, Hkv: 2, D: 128}
	for _, spec := range []string{"int8", "int8:kt128", "int4", "int4:kt128", "int2", "k4v2", "int4:kc32", "int2:kc32:v32"} {
		f := kv.MustResolve(spec, sh.D)
		l := 4 * f.Residual
		caches, keys, _ := buildBatch(t, r, f, sh, []int{l})
		c := caches[0]
		p := Params{Format: f, Shape: sh, Tq: 1}
		q := randQ(r, sh.Hq*sh.D)
		w := newWorker(p, &genericVNNIKernels)
		d, nr, g := sh.D, f.Residual, sh.Group()
		lay := f.K
		var qSq, fSq, qMax, fMax float64
		qi16 := make([]float64, d)
		n := 0
		qs, qi, lo := make([]float32, d), make([]int8, d), make([]int8, d)
		wide := lay.Elem == kv.Int8 // int8 keys: the 15-bit query
		quant := func(x []float32) float32 {
			if wide {
				a := splitQuery(qi, lo, x)
				for ch := range qi { // fold the halves back: the code is 128·hi + lo
					qi16[ch] = 128*float64(qi[ch]) + float64(lo[ch])
				}
				return a
			}
			a := quantizeQuery(qi, x)
			for ch := range qi {
				qi16[ch] = float64(qi[ch])
			}
			return a
		}
		for h := 0; h < sh.Hkv; h++ {
			w.loadQueries(q, 0, h)
			for b, blk := range c.Blocks {
				base := blk[h*f.BlockBytes():]
				for row := 0; row < g; row++ {
					qr := w.q[row*d : (row+1)*d]
					var a float32
					for t := 0; t < nr; t++ {
						if lay.Scaling == kv.PerChannel && t%lay.Group == 0 {
							for ch := range qs {
								sc, _ := lay.Param(base, lay.ParamIndex(t, ch))
								qs[ch] = qr[ch] * fp16ToF32[sc]
							}
							a = quant(qs)
						} else if lay.Scaling == kv.PerToken && t == 0 {
							a = quant(qr)
						}
						sc, _ := lay.Param(base, lay.ParamIndex(t, 0))
						var qErr, fErr float64
						for ch := 0; ch < d; ch++ {
							code := float64(lay.Code(base, t, ch))
							if lay.Scaling == kv.PerChannel {
								qErr += (float64(a)*qi16[ch] - float64(qs[ch])) * code
							} else {
								qErr += (float64(a)*qi16[ch] - float64(qr[ch])) * code * float64(fp16ToF32[sc])
							}
							sp, zp := lay.Param(base, lay.ParamIndex(t, ch))
							xq := float64(kv.Dequant(uint8(code), sp, zp))
							x := float64(keys[0][((b*nr+t)*sh.Hkv+h)*d+ch])
							fErr += float64(qr[ch]) * (xq - x)
						}
						qSq, fSq = qSq+qErr*qErr, fSq+fErr*fErr
						qMax, fMax = max(qMax, math.Abs(qErr)), max(fMax, math.Abs(fErr))
						n++
					}
				}
			}
		}
		qRMS, fRMS := math.Sqrt(qSq/float64(n)), math.Sqrt(fSq/float64(n))
		t.Logf("%-22s score error RMS: quantized query %.2e, format %.2e (ratio %.3f); max: %.2e vs %.2e",
			f.Spec.String(), qRMS, fRMS, qRMS/fRMS, qMax, fMax)
		if qRMS >= fRMS || qMax >= fMax {
			t.Errorf("%s: the quantized query's score error (RMS %.3g, max %.3g) is not below the format's own (RMS %.3g, max %.3g)",
				spec, qRMS, qMax, fRMS, fMax)
		}
	}
}
