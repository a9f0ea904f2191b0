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

// TestValueQuantVsFormatError compares, on realistic keys and values and
// the softmax weights of random queries, the output error of the VNNI
// path's quantized PV weights with the value format's own error, both in
// float64 against the exact weights: per run of PVMaxTokens tokens the
// weights w_t = p_t·s_t rounded to u8 steps Δ = max w/255 with the codes'
// midpoint folded out (pvU8: Σ_t (Δ·ŵ_t - w_t)·(code_t - m)/l), or to int16
// steps max w/32767 (pvS16, pvI4: Σ_t (Δ·ŵ_t - w_t)·code_t/l), against
// Σ_t p_t·(v̂_t - v_t)/l on the unquantized values (the format's share).
// The u8 weights' share must stay well below the format's: a fifth of it
// by RMS over all outputs, and below it at the largest. The numbers are in
// docs/perf/cpu-attention.md (v18). The same holds for softmaxU8's path
// (v28): probabilities p̃ = expU8(score - m) in the weights, the zeros'
// sums and the denominator, against the exact softmax on the same
// quantized values: Σ_t [(Δ·ŵ_t - w̃_t)·(code_t - m) + p̃_t·v̂_t]/l̃ - Σ_t p_t·v̂_t/l.
func TestValueQuantVsFormatError(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	sh := Shape{Hq: 8, Hkv: 2, D: 128}
	for _, spec := range []string{"int4", "int4:kt128", "int2", "k4v2", "k8v4"} {
		f := kv.MustResolve(spec, sh.D)
		nr := f.Residual
		l := 8 * nr
		if testing.Short() {
			l = 2 * nr
		}
		caches, _, vals := buildBatch(t, r, f, sh, []int{l})
		c := caches[0]
		p := Params{Format: f, Shape: sh, Tq: 1}
		q := randQ(r, sh.Hq*sh.D)
		w := newWorker(p, &genericVNNIKernels)
		d, g := sh.D, sh.Group()
		lk, lv := f.K, f.V
		mid := float64(int(1)<<lv.Elem.Bits()-1) / 2
		var u8Sq, s16Sq, fSq, u8Max, s16Max, fMax, xSq, xMax float64
		n := 0
		for h := 0; h < sh.Hkv; h++ {
			w.loadQueries(q, 0, h)
			for row := 0; row < g; row++ {
				qr := w.q[row*d : (row+1)*d]
				ntok := len(c.Blocks) * nr
				sc := make([]float64, ntok)
				m := math.Inf(-1)
				for b, blk := range c.Blocks {
					base := blk[h*f.BlockBytes():]
					for tk := 0; tk < nr; tk++ {
						var s float64
						for ch := 0; ch < d; ch++ {
							sp, zp := lk.Param(base, lk.ParamIndex(tk, ch))
							s += float64(qr[ch]) * float64(kv.Dequant(lk.Code(base, tk, ch), sp, zp))
						}
						sc[b*nr+tk] = s
						m = max(m, s)
					}
				}
				var den, denX float64
				pe := make([]float64, len(sc)) // softmaxU8's p
				for i := range sc {
					pe[i] = float64(expU8(float32(sc[i]) - float32(m)))
					denX += pe[i]
					sc[i] = math.Exp(sc[i] - m)
					den += sc[i]
				}
				u8Err, s16Err, fErr := make([]float64, d), make([]float64, d), make([]float64, d)
				xNum, exact := make([]float64, d), make([]float64, d)
				for b, blk := range c.Blocks {
					base := blk[h*f.BlockBytes()+f.K.Bytes:]
					for t0 := 0; t0 < nr; t0 += PVMaxTokens {
						t1 := min(nr, t0+PVMaxTokens)
						var wmax, xmax float64
						for tk := t0; tk < t1; tk++ {
							for ch := 0; ch < d; ch++ {
								sp, _ := lv.Param(base, lv.ParamIndex(tk, ch))
								wmax = max(wmax, sc[b*nr+tk]*float64(fp16ToF32[sp]))
								xmax = max(xmax, pe[b*nr+tk]*float64(fp16ToF32[sp]))
							}
						}
						d8, d16, dx := wmax/255, wmax/32767, xmax/255
						for tk := t0; tk < t1; tk++ {
							pt := sc[b*nr+tk]
							for ch := 0; ch < d; ch++ {
								sp, zp := lv.Param(base, lv.ParamIndex(tk, ch))
								code := float64(lv.Code(base, tk, ch))
								wt := pt * float64(fp16ToF32[sp])
								u8Err[ch] += (d8*math.RoundToEven(wt/d8) - wt) * (code - mid)
								s16Err[ch] += (d16*math.RoundToEven(wt/d16) - wt) * code
								x := float64(vals[0][((b*nr+tk)*sh.Hkv+h)*d+ch])
								vq := float64(kv.Dequant(uint8(code), sp, zp))
								fErr[ch] += pt * (vq - x)
								wx := pe[b*nr+tk] * float64(fp16ToF32[sp])
								xNum[ch] += (dx*math.RoundToEven(wx/dx)-wx)*(code-mid) + pe[b*nr+tk]*vq
								exact[ch] += pt * vq
							}
						}
					}
				}
				for ch := 0; ch < d; ch++ {
					e8, e16, ef := u8Err[ch]/den, s16Err[ch]/den, fErr[ch]/den
					u8Sq, s16Sq, fSq = u8Sq+e8*e8, s16Sq+e16*e16, fSq+ef*ef
					u8Max, s16Max, fMax = max(u8Max, math.Abs(e8)), max(s16Max, math.Abs(e16)), max(fMax, math.Abs(ef))
					ex := xNum[ch]/denX - exact[ch]/den
					xSq, xMax = xSq+ex*ex, max(xMax, math.Abs(ex))
					n++
				}
			}
		}
		u8RMS, s16RMS, fRMS := math.Sqrt(u8Sq/float64(n)), math.Sqrt(s16Sq/float64(n)), math.Sqrt(fSq/float64(n))
		xRMS := math.Sqrt(xSq / float64(n))
		t.Logf("%-28s softmaxU8 (expU8 + u8 weights): RMS %.2e (ratio %.3f), max %.2e", f.Spec.String(), xRMS, xRMS/fRMS, xMax)
		if xRMS >= fRMS/5 || xMax >= fMax {
			t.Errorf("%s: softmaxU8's output error (RMS %.3g, max %.3g) is not well below the format's own (RMS %.3g, max %.3g)",
				spec, xRMS, xMax, fRMS, fMax)
		}
		t.Logf("%-28s output error RMS: u8 weights %.2e, int16 weights %.2e, format %.2e (u8 ratio %.3f); max: %.2e, %.2e vs %.2e",
			f.Spec.String(), u8RMS, s16RMS, fRMS, u8RMS/fRMS, u8Max, s16Max, fMax)
		if u8RMS >= fRMS/5 || u8Max >= fMax {
			t.Errorf("%s: the u8 weights' output error (RMS %.3g, max %.3g) is not well below the format's own (RMS %.3g, max %.3g)",
				spec, u8RMS, u8Max, fRMS, fMax)
		}
	}
}
