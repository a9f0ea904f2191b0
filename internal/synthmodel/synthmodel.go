// Package synthmodel writes small random Hugging Face checkpoints of the
// Llama family (config.json and one model.safetensors) for tests: of every
// family and feature the loader supports, on any backend. The tensor names
// and shapes are written out here, not derived from the model package's
// struct tags, so that a test loading the checkpoint checks the tags too.
package synthmodel

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/bitdecode/bitdecode/internal/half"
	"github.com/bitdecode/bitdecode/model/safetensors"
)

// Shape is what the checkpoint's tensors follow from: the parsed config's
// sizes and which optional tensors its family and flags carry.
type Shape struct {
	Hidden, Intermediate, Layers, Heads, KVHeads, HeadDim, Vocab int
	// Tied: no lm_head.weight (the embedding is the output matrix).
	Tied bool
	// QKVBias, OBias, MLPBias: the projections' biases; QKNorm: q_norm and
	// k_norm weights (Qwen3).
	QKVBias, OBias, MLPBias, QKNorm bool
	// Fused: q|k|v stored as one self_attn.qkv_proj and gate|up as one
	// mlp.gate_up_proj (Phi-3).
	Fused bool
	// NormPlusOne: norm weights are stored as w of a norm by 1 + w
	// (Gemma), so they are drawn near 0 instead of near 1.
	NormPlusOne bool
	// PostNorms: OLMo 2's norms, post_attention_layernorm and
	// post_feedforward_layernorm, and no input_layernorm; QKNormFull:
	// q_norm [Heads·HeadDim] and k_norm [KVHeads·HeadDim] (OLMo 2).
	PostNorms, QKNormFull bool
	// SandwichNorms: Gemma 3's four norms a layer, input_layernorm and
	// pre_feedforward_layernorm besides PostNorms' two.
	SandwichNorms bool
	// Experts > 0: a mixture of experts replaces the MLP of the layers
	// Sparse marks: a router mlp.gate [Experts, Hidden] and Experts
	// SwiGLU MLPs of width ExpertIntermediate, mlp.experts.E.{gate,up,
	// down}_proj (Qwen's names) or, with MixtralNames,
	// block_sparse_moe.gate and block_sparse_moe.experts.E.{w1,w3,w2}.
	// SharedIntermediate > 0 adds Qwen2-MoE's shared expert of that
	// width, mlp.shared_expert.*, and its gate mlp.shared_expert_gate
	// [1, Hidden].
	Experts, ExpertIntermediate, SharedIntermediate int
	Sparse                                          []bool
	MixtralNames                                    bool
}

// Tensors lists the names and shapes of a checkpoint of shape s as
// transformers names them.
func Tensors(s Shape) map[string][]int {
	H, I, V, D := s.Hidden, s.Intermediate, s.Vocab, s.HeadDim
	QD, KVD := s.Heads*D, s.KVHeads*D
	ts := map[string][]int{
		"model.embed_tokens.weight": {V, H},
		"model.norm.weight":         {H},
	}
	if !s.Tied {
		ts["lm_head.weight"] = []int{V, H}
	}
	for l := range s.Layers {
		p := fmt.Sprintf("model.layers.%d.", l)
		if s.PostNorms {
			ts[p+"post_feedforward_layernorm.weight"] = []int{H}
		}
		if !s.PostNorms || s.SandwichNorms {
			ts[p+"input_layernorm.weight"] = []int{H}
		}
		if s.SandwichNorms {
			ts[p+"pre_feedforward_layernorm.weight"] = []int{H}
		}
		ts[p+"post_attention_layernorm.weight"] = []int{H}
		if s.Fused {
			ts[p+"self_attn.qkv_proj.weight"] = []int{QD + 2*KVD, H}
			ts[p+"mlp.gate_up_proj.weight"] = []int{2 * I, H}
		} else {
			ts[p+"self_attn.q_proj.weight"] = []int{QD, H}
			ts[p+"self_attn.k_proj.weight"] = []int{KVD, H}
			ts[p+"self_attn.v_proj.weight"] = []int{KVD, H}
			ts[p+"mlp.gate_proj.weight"] = []int{I, H}
			ts[p+"mlp.up_proj.weight"] = []int{I, H}
		}
		ts[p+"self_attn.o_proj.weight"] = []int{H, QD}
		ts[p+"mlp.down_proj.weight"] = []int{H, I}
		if s.Experts > 0 && s.Sparse[l] {
			delete(ts, p+"mlp.gate_proj.weight")
			delete(ts, p+"mlp.up_proj.weight")
			delete(ts, p+"mlp.down_proj.weight")
			addExperts(ts, p, s)
		}
		if s.QKVBias {
			ts[p+"self_attn.q_proj.bias"] = []int{QD}
			ts[p+"self_attn.k_proj.bias"] = []int{KVD}
			ts[p+"self_attn.v_proj.bias"] = []int{KVD}
		}
		if s.OBias {
			ts[p+"self_attn.o_proj.bias"] = []int{H}
		}
		if s.MLPBias {
			ts[p+"mlp.gate_proj.bias"] = []int{I}
			ts[p+"mlp.up_proj.bias"] = []int{I}
			ts[p+"mlp.down_proj.bias"] = []int{H}
		}
		if s.QKNorm {
			ts[p+"self_attn.q_norm.weight"] = []int{D}
			ts[p+"self_attn.k_norm.weight"] = []int{D}
		}
		if s.QKNormFull {
			ts[p+"self_attn.q_norm.weight"] = []int{QD}
			ts[p+"self_attn.k_norm.weight"] = []int{KVD}
		}
	}
	return ts
}

// addExperts adds the tensors of layer prefix p's mixture of experts.
func addExperts(ts map[string][]int, p string, s Shape) {
	H, IE, IS := s.Hidden, s.ExpertIntermediate, s.SharedIntermediate
	moe, names := "mlp.", [3]string{"gate_proj", "up_proj", "down_proj"}
	if s.MixtralNames {
		moe, names = "block_sparse_moe.", [3]string{"w1", "w3", "w2"}
	}
	ts[p+moe+"gate.weight"] = []int{s.Experts, H}
	for e := range s.Experts {
		q := fmt.Sprintf("%s%sexperts.%d.", p, moe, e)
		ts[q+names[0]+".weight"] = []int{IE, H}
		ts[q+names[1]+".weight"] = []int{IE, H}
		ts[q+names[2]+".weight"] = []int{H, IE}
	}
	if IS > 0 {
		ts[p+"mlp.shared_expert.gate_proj.weight"] = []int{IS, H}
		ts[p+"mlp.shared_expert.up_proj.weight"] = []int{IS, H}
		ts[p+"mlp.shared_expert.down_proj.weight"] = []int{H, IS}
		ts[p+"mlp.shared_expert_gate.weight"] = []int{1, H}
	}
}

// routerGain is the scale of a mixture of experts' router weights (their
// logits' std on unit-size inputs); the other matrices' is 1.5.
const routerGain = 4.0

// Write writes configJSON as config.json and a model.safetensors of random
// weights of shape s (plus the tensors of extra) stored as dtype into dir,
// and returns the weights as stored (rounded to dtype), by name. Norm
// weights are near 1 (near 0 with NormPlusOne), biases near ±0.5, matrices scaled so that
// activations stay near unit size and attention is far from uniform. The
// same seed gives the same checkpoint.
func Write(dir, configJSON string, s Shape, dtype safetensors.DType, seed uint64, extra map[string][]int) (map[string][]float32, error) {
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(configJSON), 0o644); err != nil {
		return nil, err
	}
	r := rand.New(rand.NewPCG(seed, seed+1))
	shapes := Tensors(s)
	maps.Copy(shapes, extra)
	w := map[string][]float32{}
	var tensors []safetensors.Tensor
	for _, name := range slices.Sorted(maps.Keys(shapes)) {
		shape := shapes[name]
		n := 1
		for _, d := range shape {
			n *= d
		}
		v := make([]float32, n)
		for i := range v {
			switch {
			case len(shape) == 1 && strings.HasSuffix(name, "norm.weight") && s.NormPlusOne:
				v[i] = float32(0.2 * r.NormFloat64())
			case len(shape) == 1 && strings.HasSuffix(name, "norm.weight"):
				v[i] = float32(1 + 0.2*r.NormFloat64())
			case len(shape) == 1:
				v[i] = float32(0.5 * r.NormFloat64())
			case name == "model.embed_tokens.weight" || name == "lm_head.weight":
				v[i] = float32(r.NormFloat64())
			case strings.HasSuffix(name, ".gate.weight"):
				// A router (mlp.gate, block_sparse_moe.gate): logits
				// of std about routerGain, so that most tokens' top-k
				// choice is clear of the backends' rounding.
				v[i] = float32(r.NormFloat64() * routerGain / math.Sqrt(float64(shape[1])))
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
			default:
				return nil, fmt.Errorf("synthmodel: dtype %s: want F32, F16 or BF16", dtype)
			}
		}
		w[name] = v
		tensors = append(tensors, safetensors.Tensor{TensorInfo: safetensors.TensorInfo{Name: name, DType: dtype, Shape: shape}, Data: data})
	}
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, tensors, map[string]string{"format": "pt"}); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), buf.Bytes(), 0o644); err != nil {
		return nil, err
	}
	return w, nil
}
