package model

import (
	"fmt"
	"math"
	"testing"

	"github.com/bitdecode/bitdecode/internal/synthmodel"
	"github.com/bitdecode/bitdecode/model/safetensors"
)

// This file holds a plain float64 forward pass of the Llama family written
// from transformers' modeling code (LlamaForCausalLM, MistralForCausalLM,
// Qwen2ForCausalLM, Qwen3ForCausalLM, Phi3ForCausalLM, GemmaForCausalLM,
// GraniteForCausalLM, Olmo2ForCausalLM, Gemma2ForCausalLM,
// Gemma3ForCausalLM),
// independent of the backend and of llama.go, and the synthetic
// checkpoints the tests run it on.

// refWeights names a checkpoint's tensors as transformers does and holds
// their values (already rounded to the stored dtype).
type refWeights map[string][]float32

// synthShape is the synthmodel.Shape of cfg's checkpoint.
func synthShape(cfg *Config) synthmodel.Shape {
	s := synthmodel.Shape{Hidden: cfg.Hidden, Intermediate: cfg.Intermediate, Layers: cfg.Layers, Heads: cfg.Heads,
		KVHeads: cfg.KVHeads, HeadDim: cfg.HeadDim, Vocab: cfg.Vocab, Tied: cfg.TieWordEmbeddings,
		QKVBias: cfg.QKVBias, OBias: cfg.OBias, MLPBias: cfg.MLPBias, QKNorm: cfg.QKNorm,
		Fused: cfg.FusedQKV, NormPlusOne: cfg.NormPlusOne,
		PostNorms: cfg.PostNorms, QKNormFull: cfg.QKNormFull, SandwichNorms: cfg.SandwichNorms}
	if mc := cfg.MoE; mc != nil {
		s.Experts, s.ExpertIntermediate, s.SharedIntermediate = mc.Experts, mc.Intermediate, mc.SharedIntermediate
		s.Sparse, s.MixtralNames = mc.Sparse, cfg.ModelType == "mixtral"
	}
	return s
}

// synthTensors lists the tensor names and shapes of cfg's checkpoint
// (synthmodel's list, written out there, not derived from llama.go's struct
// tags, so that the tags are checked too).
func synthTensors(cfg *Config) map[string][]int { return synthmodel.Tensors(synthShape(cfg)) }

// writeSynthetic writes config.json and a model.safetensors of random
// weights stored as dtype into dir and returns the weights as stored
// (synthmodel.Write).
func writeSynthetic(t *testing.T, dir, configJSON string, dtype safetensors.DType, seed uint64, extra map[string][]int) refWeights {
	t.Helper()
	cfg, err := ParseConfig([]byte(configJSON))
	if err != nil {
		t.Fatal(err)
	}
	w, err := synthmodel.Write(dir, configJSON, synthShape(cfg), dtype, seed, extra)
	if err != nil {
		t.Fatal(err)
	}
	return refWeights(w)
}

// refInvFreq computes RoPE inverse frequencies in float64 from the formulas
// of transformers' rope initializers (default, linear, llama3; longrope's
// short factors).
func refInvFreq(cfg *Config) []float64 { return refInvFreqLen(cfg, false) }

// refInvFreqLen is refInvFreq with longrope's long factors where long (the
// frequencies of a forward pass past the original context).
func refInvFreqLen(cfg *Config, long bool) []float64 {
	// R/2 frequencies over the rotated dimensions R (the whole head D
	// but with partial rotary embeddings: transformers' dim =
	// int(head_dim·partial_rotary_factor)).
	R := refRotaryDims(cfg)
	inv := make([]float64, R/2)
	for i := range inv {
		inv[i] = 1 / math.Pow(cfg.RopeTheta, float64(2*i)/float64(R))
	}
	s := cfg.RopeScaling
	if s == nil {
		return inv
	}
	for i, f := range inv {
		switch s.Type {
		case "longrope":
			ext := s.ShortFactor
			if long {
				ext = s.LongFactor
			}
			inv[i] = f / ext[i]
		case "linear":
			inv[i] = f / s.Factor
		case "llama3":
			old := float64(s.OriginalMaxPositions)
			wavelen := 2 * math.Pi / f
			scaled := f
			if wavelen > old/s.LowFreqFactor {
				scaled = f / s.Factor
			}
			smooth := (old/wavelen - s.LowFreqFactor) / (s.HighFreqFactor - s.LowFreqFactor)
			smoothed := (1-smooth)*scaled/s.Factor + smooth*scaled
			medium := !(wavelen < old/s.HighFreqFactor) && !(wavelen > old/s.LowFreqFactor)
			if medium {
				scaled = smoothed
			}
			inv[i] = scaled
		}
	}
	return inv
}

// refRotaryDims is the number of each head's dimensions RoPE rotates,
// from the config's factor as transformers computes it.
func refRotaryDims(cfg *Config) int {
	if cfg.RotaryDim != 0 {
		return cfg.RotaryDim
	}
	return cfg.HeadDim
}

// refForward runs tokens (one sequence from position 0) through the model
// and returns the logits at every position, all in float64.
func refForward(cfg *Config, w refWeights, tokens []int32) [][]float64 {
	return refForwardChunks(cfg, w, tokens, nil)
}

// refUnfuse returns w with Phi-3's fused tensors split into the q, k, v,
// gate and up weights by rows, as Phi3Attention slices qkv_proj's output
// and Phi3MLP chunks gate_up_proj's.
func refUnfuse(cfg *Config, w refWeights) refWeights {
	H, QD, KVD, I := cfg.Hidden, cfg.Heads*cfg.HeadDim, cfg.KVHeads*cfg.HeadDim, cfg.Intermediate
	out := refWeights{}
	for name, v := range w {
		out[name] = v
	}
	for l := range cfg.Layers {
		p := fmt.Sprintf("model.layers.%d.", l)
		qkv, gu := w[p+"self_attn.qkv_proj.weight"], w[p+"mlp.gate_up_proj.weight"]
		out[p+"self_attn.q_proj.weight"] = qkv[:QD*H]
		out[p+"self_attn.k_proj.weight"] = qkv[QD*H : (QD+KVD)*H]
		out[p+"self_attn.v_proj.weight"] = qkv[(QD+KVD)*H:]
		out[p+"mlp.gate_proj.weight"] = gu[:I*H]
		out[p+"mlp.up_proj.weight"] = gu[I*H:]
	}
	return out
}

// refForwardChunks is refForward with the tokens given to successive
// forward passes of the given sizes (nil: one pass), each with a KV cache
// of the ones before: the passes differ only where longrope picks its
// frequencies per pass (long ones for a pass whose last position is at
// least the original context) and the keys cached by earlier passes keep
// theirs, as transformers' generation does.
func refForwardChunks(cfg *Config, w refWeights, tokens []int32, chunks []int) [][]float64 {
	H, D, Hq, Hkv, I := cfg.Hidden, cfg.HeadDim, cfg.Heads, cfg.KVHeads, cfg.Intermediate
	T := len(tokens)
	eps := cfg.RMSNormEps
	if chunks == nil {
		chunks = []int{T}
	}
	// invAt[t] are the frequencies of the pass holding position t.
	invAt := make([][]float64, 0, T)
	for start, n := range chunksStarts(chunks) {
		long := cfg.RopeScaling != nil && cfg.RopeScaling.Type == "longrope" && start+n > cfg.RopeScaling.OriginalMaxPositions
		inv := refInvFreqLen(cfg, long)
		for range n {
			invAt = append(invAt, inv)
		}
	}
	attnFactor := 1.0 // longrope's, on cos and sin
	if cfg.RopeScaling != nil && cfg.RopeScaling.Type == "longrope" {
		attnFactor = cfg.RopeScaling.AttentionFactor
	}
	if cfg.FusedQKV {
		w = refUnfuse(cfg, w)
	}

	get := func(name string) []float32 { return w[name] }
	linear := func(x []float64, wn, bn string, out, in int) []float64 {
		W, B := get(wn), get(bn)
		y := make([]float64, out)
		for n := range out {
			var s float64
			for k := range in {
				s += x[k] * float64(W[n*in+k])
			}
			if B != nil {
				s += float64(B[n])
			}
			y[n] = s
		}
		return y
	}
	rmsnorm := func(x []float64, wn string) []float64 {
		W := get(wn)
		var ss float64
		for _, v := range x {
			ss += v * v
		}
		r := 1 / math.Sqrt(ss/float64(len(x))+eps)
		y := make([]float64, len(x))
		for i, v := range x {
			scale := float64(W[i])
			if cfg.NormPlusOne { // GemmaRMSNorm: x·r·(1 + w)
				scale = 1 + scale
			}
			y[i] = scale * v * r
		}
		return y
	}
	// Phi3's apply_rotary_pos_emb: the first R dimensions rotated with
	// rotate_half (i paired with i + R/2) and cos, sin times the attention
	// factor; the other D − R passed through unchanged (R = D but for
	// partial rotary embeddings).
	R := refRotaryDims(cfg)
	var invLocal []float64 // Gemma 3's sliding layers: rope_local_base_freq, unscaled
	if cfg.LocalRopeTheta != 0 {
		invLocal = make([]float64, R/2)
		for i := range invLocal {
			invLocal[i] = 1 / math.Pow(cfg.LocalRopeTheta, float64(2*i)/float64(R))
		}
	}
	// local: the layer being computed uses invLocal.
	local := false
	rope := func(x []float64, pos int) { // one head, rotate_half layout
		inv := invAt[pos]
		if local {
			inv = invLocal
		}
		for i := range R / 2 {
			th := float64(pos) * inv[i]
			c, s := math.Cos(th)*attnFactor, math.Sin(th)*attnFactor
			x1, x2 := x[i], x[i+R/2]
			x[i] = x1*c - x2*s
			x[i+R/2] = x2*c + x1*s
		}
	}

	h := make([][]float64, T)
	E := get("model.embed_tokens.weight")
	for t, id := range tokens {
		h[t] = make([]float64, H)
		for k := range H {
			h[t][k] = float64(E[int(id)*H+k])
			switch cfg.ModelType {
			case "gemma", "gemma2", "gemma3_text": // GemmaTextScaledWordEmbedding
				h[t][k] *= float64(cfg.EmbedScale)
			case "granite": // GraniteModel's embedding_multiplier
				h[t][k] *= cfg.refGranite().embedding
			}
		}
	}
	for l := range cfg.Layers {
		p := fmt.Sprintf("model.layers.%d.", l)
		local = invLocal != nil && cfg.LayerWindows[l] > 0
		q := make([][]float64, T)
		k := make([][]float64, T)
		v := make([][]float64, T)
		for t := range T {
			x := h[t] // Olmo2DecoderLayer has no input norm
			if !cfg.PostNorms || cfg.SandwichNorms {
				x = rmsnorm(h[t], p+"input_layernorm.weight")
			}
			q[t] = linear(x, p+"self_attn.q_proj.weight", p+"self_attn.q_proj.bias", Hq*D, H)
			k[t] = linear(x, p+"self_attn.k_proj.weight", p+"self_attn.k_proj.bias", Hkv*D, H)
			v[t] = linear(x, p+"self_attn.v_proj.weight", p+"self_attn.v_proj.bias", Hkv*D, H)
			if cfg.QKNormFull { // Olmo2Attention: q_norm(q_proj(x)), over the whole projection
				q[t] = rmsnorm(q[t], p+"self_attn.q_norm.weight")
				k[t] = rmsnorm(k[t], p+"self_attn.k_norm.weight")
			}
			for hh := range Hq {
				qh := q[t][hh*D : (hh+1)*D]
				if cfg.QKNorm {
					copy(qh, rmsnorm(qh, p+"self_attn.q_norm.weight"))
				}
				rope(qh, t)
			}
			for hh := range Hkv {
				kh := k[t][hh*D : (hh+1)*D]
				if cfg.QKNorm {
					copy(kh, rmsnorm(kh, p+"self_attn.k_norm.weight"))
				}
				rope(kh, t)
			}
		}
		window := cfg.LayerWindows[l]
		scale := 1 / math.Sqrt(float64(D))
		switch cfg.ModelType {
		case "granite": // GraniteAttention.scaling
			scale = cfg.refGranite().attention
		case "gemma2", "gemma3_text": // Gemma2Attention.scaling: query_pre_attn_scalar^-½
			if cfg.AttnScale != 0 {
				scale = cfg.AttnScale
			}
		}
		res := 1.0
		if cfg.ModelType == "granite" {
			res = cfg.refGranite().residual
		}
		for t := range T {
			attn := make([]float64, Hq*D)
			for hh := range Hq {
				g := hh / (Hq / Hkv)
				lo := 0
				if window > 0 {
					lo = max(0, t-window+1)
				}
				scores := make([]float64, t+1)
				m := math.Inf(-1)
				for j := lo; j <= t; j++ {
					var s float64
					for d := range D {
						s += q[t][hh*D+d] * k[j][g*D+d]
					}
					scores[j] = s * scale
					if c := cfg.AttnSoftcap; c != 0 { // eager_attention_forward's softcap, before the mask
						scores[j] = c * math.Tanh(scores[j]/c)
					}
					m = max(m, scores[j])
				}
				var sum float64
				for j := lo; j <= t; j++ {
					scores[j] = math.Exp(scores[j] - m)
					sum += scores[j]
				}
				for j := lo; j <= t; j++ {
					for d := range D {
						attn[hh*D+d] += scores[j] / sum * v[j][g*D+d]
					}
				}
			}
			o := linear(attn, p+"self_attn.o_proj.weight", p+"self_attn.o_proj.bias", H, Hq*D)
			if cfg.PostNorms {
				o = rmsnorm(o, p+"post_attention_layernorm.weight")
			}
			for i := range H {
				h[t][i] += o[i] * res
			}
			x := h[t]
			switch {
			case cfg.SandwichNorms: // Gemma3DecoderLayer
				x = rmsnorm(h[t], p+"pre_feedforward_layernorm.weight")
			case !cfg.PostNorms:
				x = rmsnorm(h[t], p+"post_attention_layernorm.weight")
			}
			var down []float64
			if cfg.MoE != nil && cfg.MoE.Sparse[l] {
				down = refMoE(cfg, p, x, get, linear)
			} else {
				gate := linear(x, p+"mlp.gate_proj.weight", p+"mlp.gate_proj.bias", I, H)
				up := linear(x, p+"mlp.up_proj.weight", p+"mlp.up_proj.bias", I, H)
				for i, g := range gate {
					if cfg.GeGLU { // gelu_pytorch_tanh
						gate[i] = geluTanh64(g) * up[i]
					} else {
						gate[i] = g / (1 + math.Exp(-g)) * up[i]
					}
				}
				down = linear(gate, p+"mlp.down_proj.weight", p+"mlp.down_proj.bias", H, I)
			}
			if cfg.PostNorms {
				down = rmsnorm(down, p+"post_feedforward_layernorm.weight")
			}
			for i := range H {
				h[t][i] += down[i] * res
			}
		}
	}
	head := "lm_head.weight"
	if cfg.TieWordEmbeddings {
		head = "model.embed_tokens.weight"
	}
	logits := make([][]float64, T)
	for t := range T {
		logits[t] = linear(rmsnorm(h[t], "model.norm.weight"), head, "", cfg.Vocab, H)
		if cfg.ModelType == "granite" { // GraniteForCausalLM: logits / logits_scaling
			for i := range logits[t] {
				logits[t][i] /= cfg.refGranite().logits
			}
		}
		if c := cfg.FinalSoftcap; c != 0 { // Gemma2ForCausalLM's final_logit_softcapping
			for i, x := range logits[t] {
				logits[t][i] = c * math.Tanh(x/c)
			}
		}
	}
	return logits
}

// refMoE is the mixture of experts of the layer of prefix p on x in
// float64, from transformers' XxxTopKRouter, XxxExperts and (Qwen2-MoE)
// shared expert: p = softmax(x·Wrᵀ), the k largest, renormalised where
// NormTopK, the chosen experts' SwiGLU MLPs weighted and summed, plus
// sigmoid(x·Wsgᵀ)·shared(x).
func refMoE(cfg *Config, p string, x []float64, get func(string) []float32, linear func(x []float64, wn, bn string, out, in int) []float64) []float64 {
	mc, H := cfg.MoE, cfg.Hidden
	moe, names := "mlp.", [3]string{"gate_proj", "up_proj", "down_proj"}
	if cfg.ModelType == "mixtral" {
		moe, names = "block_sparse_moe.", [3]string{"w1", "w3", "w2"}
	}
	logits := linear(x, p+moe+"gate.weight", "", mc.Experts, H)
	mx := math.Inf(-1)
	for _, v := range logits {
		mx = max(mx, v)
	}
	prob := make([]float64, mc.Experts)
	var sum float64
	for i, v := range logits {
		prob[i] = math.Exp(v - mx)
		sum += prob[i]
	}
	chosen := make([]bool, mc.Experts)
	var top []int
	var s float64
	for range mc.TopK {
		best := -1
		for i, v := range prob {
			if !chosen[i] && (best < 0 || v > prob[best]) {
				best = i
			}
		}
		chosen[best] = true
		top = append(top, best)
		s += prob[best] / sum
	}
	mlp := func(prefix, gn, un, dn string, width int) []float64 {
		gate := linear(x, prefix+gn+".weight", "", width, H)
		up := linear(x, prefix+un+".weight", "", width, H)
		for i, g := range gate {
			gate[i] = g / (1 + math.Exp(-g)) * up[i]
		}
		return linear(gate, prefix+dn+".weight", "", H, width)
	}
	y := make([]float64, H)
	for _, e := range top {
		w := prob[e] / sum
		if mc.NormTopK {
			w /= s
		}
		out := mlp(fmt.Sprintf("%s%sexperts.%d.", p, moe, e), names[0], names[1], names[2], mc.Intermediate)
		for i := range y {
			y[i] += w * out[i]
		}
	}
	if mc.SharedIntermediate > 0 {
		out := mlp(p+"mlp.shared_expert.", "gate_proj", "up_proj", "down_proj", mc.SharedIntermediate)
		g := 1 / (1 + math.Exp(-linear(x, p+"mlp.shared_expert_gate.weight", "", 1, H)[0]))
		for i := range y {
			y[i] += g * out[i]
		}
	}
	return y
}

// refMultipliers are Granite's four multipliers as config.json gives them.
type refMultipliers struct{ embedding, attention, residual, logits float64 }

// refGranite returns cfg's Granite multipliers, read back from the
// Config's fields as the reference's inputs (the loader folds them into
// weights; the reference applies them where GraniteModel does).
func (cfg *Config) refGranite() refMultipliers {
	m := refMultipliers{embedding: 1, attention: cfg.AttnScale, residual: cfg.ResidualScale, logits: 1 / cfg.LogitScale}
	if cfg.EmbedScale != 0 {
		m.embedding = float64(cfg.EmbedScale)
	}
	return m
}

// chunksStarts maps each pass's first position to its size, in order
// (a range over it visits the passes as a slice would: it is a sorted
// iterator).
func chunksStarts(chunks []int) func(yield func(int, int) bool) {
	return func(yield func(int, int) bool) {
		start := 0
		for _, n := range chunks {
			if !yield(start, n) {
				return
			}
			start += n
		}
	}
}

// geluTanh64 is gelu_pytorch_tanh in float64: g/2·(1 + tanh(u)), u =
// √(2/π)·(g + 0.044715·g³), written for u < 0 as g·e/(1 + e) with e = e^{2u}
// (the same function), where 1 + tanh(u) would cancel to 0.
func geluTanh64(g float64) float64 {
	u := math.Sqrt(2/math.Pi) * (g + 0.044715*g*g*g)
	if u >= 0 {
		return 0.5 * g * (1 + math.Tanh(u))
	}
	e := math.Exp(2 * u)
	return g * e / (1 + e)
}

// scaledMaxDiff returns the largest |out − want| over want's rows, each
// row's differences divided by that row's largest |want|.
func scaledMaxDiff(out *Logits, want [][]float64) float64 {
	var moved float64
	for p, row := range want {
		var scale float64
		for _, v := range row {
			scale = max(scale, math.Abs(v))
		}
		for j, v := range row {
			moved = max(moved, math.Abs(float64(out.Row(p)[j])-v)/scale)
		}
	}
	return moved
}
