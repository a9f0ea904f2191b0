package attn

import (
	"fmt"
	"math"

	"github.com/bitdecode/bitdecode/internal/half"
	"github.com/bitdecode/bitdecode/kv"
)

// Params describes one decode call.
type Params struct {
	Format kv.Format
	Shape  Shape
	// Tq is the number of query tokens per sequence (1 for plain decoding,
	// a few for speculative verification). They are the last Tq cached
	// tokens: query token i sees cached tokens 0 .. L-Tq+i.
	Tq int
	// Scale multiplies every score; 0 means 1/sqrt(D).
	Scale float32
	// Window, when positive, is the layer's sliding window: the query token
	// at position p sees only cached tokens max(0, p-Window+1) .. p (the
	// dense rule of model/attention.go and transformers' sliding-window
	// mask); 0 is full causal attention. Decode (and Reference) take it;
	// DecodePlanes refuses it.
	Window int
	// Softcap, when positive, soft-caps every score s (after Scale) to
	// Softcap·tanh(s/Softcap) before the mask and the softmax (Gemma 2's
	// attn_logit_softcapping, as transformers' eager attention orders
	// it); 0 is off. Decode and Reference take it; DecodePlanes refuses
	// it.
	Softcap float32
	// MassEvery samples the attention mass of the bw decode (DecodePlanes,
	// ReferencePlanes): only query token i, at position L-Tq+i, with
	// kv.MassSampled(L-Tq+i, MassEvery) adds its rows' probabilities to
	// the mass (kv.PlaneSpec.MassEvery); 0 and 1 add every query token's.
	MassEvery int
}

// FirstVisible returns the first cached token a query token at position pos
// sees: pos-Window+1 under a sliding window, else 0.
func (p Params) FirstVisible(pos int) int {
	if p.Window <= 0 {
		return 0
	}
	return max(0, pos-p.Window+1)
}

// checkSoftcap refuses a soft-cap that is negative, infinite or NaN.
func (p Params) checkSoftcap() error {
	if c := float64(p.Softcap); !(c >= 0) || math.IsInf(c, 0) {
		return fmt.Errorf("attn: soft-cap %g, want a finite cap > 0 (0: none)", c)
	}
	return nil
}

func (p Params) scale() float32 {
	if p.Scale != 0 {
		return p.Scale
	}
	return float32(1 / math.Sqrt(float64(p.Shape.D)))
}

func (p Params) check(out, q []float32, seqs []*Seq) error {
	if err := p.Shape.Validate(); err != nil {
		return err
	}
	if p.Format.D != p.Shape.D {
		return fmt.Errorf("attn: format resolved for head dim %d, shape has %d", p.Format.D, p.Shape.D)
	}
	if p.Tq < 1 {
		return fmt.Errorf("attn: Tq=%d, want >= 1", p.Tq)
	}
	if p.Window < 0 {
		return fmt.Errorf("attn: window %d, want >= 0 (0: none)", p.Window)
	}
	if err := p.checkSoftcap(); err != nil {
		return err
	}
	n := len(seqs) * p.Tq * p.Shape.Hq * p.Shape.D
	if len(q) != n || len(out) != n {
		return fmt.Errorf("attn: q has %d and out %d values; want B*Tq*Hq*D = %d", len(q), len(out), n)
	}
	hkv, nr, d := p.Shape.Hkv, p.Format.Residual, p.Shape.D
	for b, s := range seqs {
		if l := s.Len(nr); l < p.Tq {
			return fmt.Errorf("attn: sequence %d holds %d tokens, fewer than Tq=%d", b, l, p.Tq)
		}
		if s.ResLen < 0 || s.ResLen >= nr || len(s.ResK) < hkv*nr*d || len(s.ResV) < hkv*nr*d {
			return fmt.Errorf("attn: sequence %d: residual of %d tokens in buffers of %d/%d values (Nr=%d)", b, s.ResLen, len(s.ResK), len(s.ResV), nr)
		}
		for i, blk := range s.Blocks {
			if len(blk) < hkv*p.Format.BlockBytes() {
				return fmt.Errorf("attn: sequence %d block %d has %d bytes, want %d", b, i, len(blk), hkv*p.Format.BlockBytes())
			}
		}
	}
	return nil
}

// RefStats are by-products of the reference that tests turn into tolerances.
type RefStats struct {
	// MaxAbsK and MaxAbsV are the largest |K| and |V| values read
	// (dequantized, in the rotated basis if the format rotates).
	MaxAbsK, MaxAbsV float64
	// MaxL is the longest sequence.
	MaxL int
	// ScoreMag holds, for every output row (b, i, hq) in out's order, the
	// largest over visible tokens of Σ_c |q_c|·(|k_c| + 2|z_c|), where z_c is
	// the zero of the group k_c was quantized in (0 for float storage): the
	// magnitude that float32 rounding of a folded score is relative to.
	ScoreMag []float64
}

// Reference computes the decode attention of p in float64 on the values the
// cache stores (blocks dequantized with the kv reference, the residual's fp16
// values), writing out [B][Tq][Hq][D]; with p.Window, each query token over
// its window alone. It is slow and simple on purpose.
func Reference(out, q []float32, seqs []*Seq, p Params) (RefStats, error) {
	var st RefStats
	if err := p.check(out, q, seqs); err != nil {
		return st, err
	}
	f, sh := p.Format, p.Shape
	d, nr, g := sh.D, f.Residual, sh.Group()
	scale := float64(p.scale())
	st.ScoreMag = make([]float64, len(out)/d)
	for b, s := range seqs {
		l := s.Len(nr)
		st.MaxL = max(st.MaxL, l)
		for h := 0; h < sh.Hkv; h++ {
			keys, vals := dequantSeq(s, f, sh.Hkv, h)
			zeros := keyZeros(s, f, h)
			for _, x := range keys {
				st.MaxAbsK = max(st.MaxAbsK, math.Abs(x))
			}
			for _, x := range vals {
				st.MaxAbsV = max(st.MaxAbsV, math.Abs(x))
			}
			for i := 0; i < p.Tq; i++ {
				limit := l - p.Tq + i // last visible token
				first := p.FirstVisible(limit)
				for j := 0; j < g; j++ {
					hq := h*g + j
					off := ((b*p.Tq+i)*sh.Hq + hq) * d
					qv := make([]float64, d)
					for c := range qv {
						qv[c] = float64(q[off+c])
					}
					if f.Rotate {
						rotate64(qv)
					}
					scores := make([]float64, limit+1)
					m := math.Inf(-1)
					for t := range scores {
						if t < first {
							scores[t] = math.Inf(-1) // outside the window: weight 0
							continue
						}
						var sum, mag float64
						for c := range d {
							sum += qv[c] * keys[t*d+c]
							mag += math.Abs(qv[c]) * (math.Abs(keys[t*d+c]) + 2*math.Abs(zeros[t*d+c]))
						}
						scores[t] = sum * scale
						if p.Softcap != 0 {
							c := float64(p.Softcap)
							scores[t] = c * math.Tanh(scores[t]/c)
						}
						m = max(m, scores[t])
						st.ScoreMag[off/d] = max(st.ScoreMag[off/d], mag)
					}
					var den float64
					o := make([]float64, d)
					for t, sc := range scores {
						w := math.Exp(sc - m)
						den += w
						for c := range d {
							o[c] += w * vals[t*d+c]
						}
					}
					for c := range o {
						o[c] /= den
					}
					if f.Rotate {
						rotate64(o)
					}
					for c := range o {
						out[off+c] = float32(o[c])
					}
				}
			}
		}
	}
	return st, nil
}

// dequantSeq returns every cached K and V value of KV head h as float64,
// [L][D] each.
func dequantSeq(s *Seq, f kv.Format, hkv, h int) (keys, vals []float64) {
	d, nr := f.D, f.Residual
	l := s.Len(nr)
	keys, vals = make([]float64, l*d), make([]float64, l*d)
	tmp := make([]float32, nr*d)
	for i, blk := range s.Blocks {
		base := blk[h*f.BlockBytes():]
		f.K.Unpack(tmp, base[:f.K.Bytes])
		for j, x := range tmp {
			keys[i*nr*d+j] = float64(x)
		}
		f.V.Unpack(tmp, base[f.K.Bytes:f.K.Bytes+f.V.Bytes])
		for j, x := range tmp {
			vals[i*nr*d+j] = float64(x)
		}
	}
	off := len(s.Blocks) * nr * d
	for j := 0; j < s.ResLen*d; j++ {
		keys[off+j] = float64(half.ToFloat32(s.ResK[h*nr*d+j]))
		vals[off+j] = float64(half.ToFloat32(s.ResV[h*nr*d+j]))
	}
	return keys, vals
}

// keyZeros returns the zero each cached key value of KV head h was
// quantized with, [L][D] (0 where keys are stored as floats).
func keyZeros(s *Seq, f kv.Format, h int) []float64 {
	d, nr := f.D, f.Residual
	z := make([]float64, s.Len(nr)*d)
	if !f.K.Elem.IsInt() {
		return z
	}
	for i, blk := range s.Blocks {
		base := blk[h*f.BlockBytes():]
		for t := 0; t < nr; t++ {
			for c := 0; c < d; c++ {
				_, zero := f.K.Param(base, f.K.ParamIndex(t, c))
				z[(i*nr+t)*d+c] = float64(half.ToFloat32(zero))
			}
		}
	}
	return z
}

// rotate64 is kv.Rotate in float64.
func rotate64(x []float64) {
	n := len(x)
	for h := 1; h < n; h *= 2 {
		for i := 0; i < n; i += 2 * h {
			for j := i; j < i+h; j++ {
				a, b := x[j], x[j+h]
				x[j], x[j+h] = a+b, a-b
			}
		}
	}
	s := 1 / math.Sqrt(float64(n))
	for i := range x {
		x[i] *= s
	}
}

// ExactReference computes attention in float64 on unquantized K and V,
// [B] sequences of [L][Hkv][D] values each, for measuring a format's error
// against full precision. q and out are as in Reference.
func ExactReference(out, q []float32, keys, vals [][]float32, sh Shape, tq int, scale float32) {
	d, g := sh.D, sh.Group()
	if scale == 0 {
		scale = float32(1 / math.Sqrt(float64(d)))
	}
	for b := range keys {
		l := len(keys[b]) / (sh.Hkv * d)
		for i := 0; i < tq; i++ {
			limit := l - tq + i
			for hq := 0; hq < sh.Hq; hq++ {
				h := hq / g
				off := ((b*tq+i)*sh.Hq + hq) * d
				scores := make([]float64, limit+1)
				m := math.Inf(-1)
				for t := range scores {
					var sum float64
					for c := range d {
						sum += float64(q[off+c]) * float64(keys[b][(t*sh.Hkv+h)*d+c])
					}
					scores[t] = sum * float64(scale)
					m = max(m, scores[t])
				}
				var den float64
				o := make([]float64, d)
				for t, sc := range scores {
					w := math.Exp(sc - m)
					den += w
					for c := range d {
						o[c] += w * float64(vals[b][(t*sh.Hkv+h)*d+c])
					}
				}
				for c := range o {
					out[off+c] = float32(o[c] / den)
				}
			}
		}
	}
}
