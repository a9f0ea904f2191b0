package model

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/bitdecode/bitdecode/internal/half"
	"github.com/bitdecode/bitdecode/model/safetensors"
)

// This file holds a plain float64 forward pass of the Llama family written
// from transformers' modeling code (LlamaForCausalLM, MistralForCausalLM,
// Qwen2ForCausalLM, Qwen3ForCausalLM), independent of the backend and of
// llama.go, and the synthetic checkpoints the tests run it on.

// refWeights names a checkpoint's tensors as transformers does and holds
// their values (already rounded to the stored dtype).
type refWeights map[string][]float32

// synthTensors lists the tensor names and shapes of cfg's checkpoint,
// written out here (not derived from llama.go's struct tags) so that the tags
// are checked too.
func synthTensors(cfg *Config) map[string][]int {
	H, I, V, D := cfg.Hidden, cfg.Intermediate, cfg.Vocab, cfg.HeadDim
	QD, KVD := cfg.Heads*D, cfg.KVHeads*D
	ts := map[string][]int{
		"model.embed_tokens.weight": {V, H},
		"model.norm.weight":         {H},
	}
	if !cfg.TieWordEmbeddings {
		ts["lm_head.weight"] = []int{V, H}
	}
	for l := range cfg.Layers {
		p := fmt.Sprintf("model.layers.%d.", l)
		ts[p+"input_layernorm.weight"] = []int{H}
		ts[p+"post_attention_layernorm.weight"] = []int{H}
		ts[p+"self_attn.q_proj.weight"] = []int{QD, H}
		ts[p+"self_attn.k_proj.weight"] = []int{KVD, H}
		ts[p+"self_attn.v_proj.weight"] = []int{KVD, H}
		ts[p+"self_attn.o_proj.weight"] = []int{H, QD}
		ts[p+"mlp.gate_proj.weight"] = []int{I, H}
		ts[p+"mlp.up_proj.weight"] = []int{I, H}
		ts[p+"mlp.down_proj.weight"] = []int{H, I}
		if cfg.QKVBias {
			ts[p+"self_attn.q_proj.bias"] = []int{QD}
			ts[p+"self_attn.k_proj.bias"] = []int{KVD}
			ts[p+"self_attn.v_proj.bias"] = []int{KVD}
		}
		if cfg.OBias {
			ts[p+"self_attn.o_proj.bias"] = []int{H}
		}
		if cfg.MLPBias {
			ts[p+"mlp.gate_proj.bias"] = []int{I}
			ts[p+"mlp.up_proj.bias"] = []int{I}
			ts[p+"mlp.down_proj.bias"] = []int{H}
		}
		if cfg.QKNorm {
			ts[p+"self_attn.q_norm.weight"] = []int{D}
			ts[p+"self_attn.k_norm.weight"] = []int{D}
		}
	}
	return ts
}

// writeSynthetic writes config.json and a model.safetensors of random
// weights stored as dtype into dir and returns the weights as stored.
// Norm weights are near 1, biases near ±0.5, matrices scaled so activations
// stay near unit size and attention is far from uniform.
func writeSynthetic(t *testing.T, dir, configJSON string, dtype safetensors.DType, seed uint64, extra map[string][]int) refWeights {
	t.Helper()
	cfg, err := ParseConfig([]byte(configJSON))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(configJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, seed+1))
	shapes := synthTensors(cfg)
	for name, shape := range extra {
		shapes[name] = shape
	}
	w := refWeights{}
	var tensors []safetensors.Tensor
	for _, name := range sortedKeys(shapes) {
		shape := shapes[name]
		n := 1
		for _, d := range shape {
			n *= d
		}
		v := make([]float32, n)
		for i := range v {
			switch {
			case len(shape) == 1 && hasSuffix(name, "norm.weight"):
				v[i] = float32(1 + 0.2*r.NormFloat64())
			case len(shape) == 1:
				v[i] = float32(0.5 * r.NormFloat64())
			case name == "model.embed_tokens.weight" || name == "lm_head.weight":
				v[i] = float32(r.NormFloat64())
			default:
				v[i] = float32(r.NormFloat64() * 1.5 / math.Sqrt(float64(shape[1])))
			}
		}
		var data []byte
		for i, x := range v {
			switch dtype {
			case safetensors.F32:
				data = binary.LittleEndian.AppendUint32(data, math.Float32bits(x))
			case safetensors.F16:
				h := half.FromFloat32(x)
				v[i] = half.ToFloat32(h)
				data = binary.LittleEndian.AppendUint16(data, h)
			case safetensors.BF16:
				h := half.BF16FromFloat32(x)
				v[i] = half.BF16ToFloat32(h)
				data = binary.LittleEndian.AppendUint16(data, h)
			}
		}
		w[name] = v
		tensors = append(tensors, safetensors.Tensor{TensorInfo: safetensors.TensorInfo{Name: name, DType: dtype, Shape: shape}, Data: data})
	}
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, tensors, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return w
}

func hasSuffix(s, suf string) bool { return len(s) >= len(suf) && s[len(s)-len(suf):] == suf }

// refInvFreq computes RoPE inverse frequencies in float64 from the formulas
// of transformers' rope initializers (default, linear, llama3).
func refInvFreq(cfg *Config) []float64 {
	D := cfg.HeadDim
	inv := make([]float64, D/2)
	for i := range inv {
		inv[i] = 1 / math.Pow(cfg.RopeTheta, float64(2*i)/float64(D))
	}
	s := cfg.RopeScaling
	if s == nil {
		return inv
	}
	for i, f := range inv {
		switch s.Type {
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

// refForward runs tokens (one sequence from position 0) through the model
// and returns the logits at every position, all in float64.
func refForward(cfg *Config, w refWeights, tokens []int32) [][]float64 {
	H, D, Hq, Hkv, I := cfg.Hidden, cfg.HeadDim, cfg.Heads, cfg.KVHeads, cfg.Intermediate
	T := len(tokens)
	eps := cfg.RMSNormEps
	inv := refInvFreq(cfg)

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
			y[i] = float64(W[i]) * v * r
		}
		return y
	}
	rope := func(x []float64, pos int) { // one head, rotate_half layout
		for i := range D / 2 {
			th := float64(pos) * inv[i]
			c, s := math.Cos(th), math.Sin(th)
			x1, x2 := x[i], x[i+D/2]
			x[i] = x1*c - x2*s
			x[i+D/2] = x2*c + x1*s
		}
	}

	h := make([][]float64, T)
	E := get("model.embed_tokens.weight")
	for t, id := range tokens {
		h[t] = make([]float64, H)
		for k := range H {
			h[t][k] = float64(E[int(id)*H+k])
		}
	}
	for l := range cfg.Layers {
		p := fmt.Sprintf("model.layers.%d.", l)
		q := make([][]float64, T)
		k := make([][]float64, T)
		v := make([][]float64, T)
		for t := range T {
			x := rmsnorm(h[t], p+"input_layernorm.weight")
			q[t] = linear(x, p+"self_attn.q_proj.weight", p+"self_attn.q_proj.bias", Hq*D, H)
			k[t] = linear(x, p+"self_attn.k_proj.weight", p+"self_attn.k_proj.bias", Hkv*D, H)
			v[t] = linear(x, p+"self_attn.v_proj.weight", p+"self_attn.v_proj.bias", Hkv*D, H)
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
					scores[j] = s / math.Sqrt(float64(D))
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
			for i := range H {
				h[t][i] += o[i]
			}
			x := rmsnorm(h[t], p+"post_attention_layernorm.weight")
			gate := linear(x, p+"mlp.gate_proj.weight", p+"mlp.gate_proj.bias", I, H)
			up := linear(x, p+"mlp.up_proj.weight", p+"mlp.up_proj.bias", I, H)
			for i := range gate {
				gate[i] = gate[i] / (1 + math.Exp(-gate[i])) * up[i]
			}
			down := linear(gate, p+"mlp.down_proj.weight", p+"mlp.down_proj.bias", H, I)
			for i := range H {
				h[t][i] += down[i]
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
	}
	return logits
}
