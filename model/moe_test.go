package model

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/bitdecode/bitdecode/backend/cpu"
	"github.com/bitdecode/bitdecode/model/safetensors"
)

// Configs of the three families as their Hub checkpoints spell them, cut to
// what the loader reads (Mixtral-8x7B, Qwen1.5-MoE-A2.7B, Qwen3-30B-A3B).
const (
	cfgMixtral = `{"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "hidden_size": 4096,
 "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
 "vocab_size": 32000, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "sliding_window": null,
 "num_local_experts": 8, "num_experts_per_tok": 2, "router_jitter_noise": 0.0, "torch_dtype": "bfloat16"}`
	cfgQwen2MoE = `{"architectures": ["Qwen2MoeForCausalLM"], "model_type": "qwen2_moe", "hidden_size": 2048,
 "intermediate_size": 5632, "num_hidden_layers": 24, "num_attention_heads": 16, "num_key_value_heads": 16,
 "vocab_size": 151936, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "use_sliding_window": false,
 "sliding_window": 32768, "max_window_layers": 21, "decoder_sparse_step": 1, "moe_intermediate_size": 1408,
 "shared_expert_intermediate_size": 5632, "num_experts_per_tok": 4, "num_experts": 60, "norm_topk_prob": false,
 "torch_dtype": "bfloat16"}`
	cfgQwen3MoE = `{"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 2048,
 "intermediate_size": 6144, "num_hidden_layers": 48, "num_attention_heads": 32, "num_key_value_heads": 4,
 "head_dim": 128, "vocab_size": 151936, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "attention_bias": false,
 "use_sliding_window": false, "sliding_window": null, "max_window_layers": 48, "decoder_sparse_step": 1,
 "moe_intermediate_size": 768, "num_experts_per_tok": 8, "num_experts": 128, "norm_topk_prob": true,
 "mlp_only_layers": [], "torch_dtype": "bfloat16"}`
)

func TestMoEConfigs(t *testing.T) {
	all := func(n int) []bool {
		s := make([]bool, n)
		for i := range s {
			s[i] = true
		}
		return s
	}
	for _, tc := range []struct {
		name, json string
		want       MoEConfig
		qkvBias    bool
		qkNorm     bool
	}{
		{"mixtral", cfgMixtral, MoEConfig{Experts: 8, TopK: 2, Intermediate: 14336, NormTopK: true, Sparse: all(32)}, false, false},
		{"qwen2_moe", cfgQwen2MoE, MoEConfig{Experts: 60, TopK: 4, Intermediate: 1408, SharedIntermediate: 5632, Sparse: all(24)}, true, false},
		{"qwen3_moe", cfgQwen3MoE, MoEConfig{Experts: 128, TopK: 8, Intermediate: 768, NormTopK: true, Sparse: all(48)}, false, true},
		{"qwen3_moe as transformers 5.17 writes it", strings.Replace(cfgQwen3MoE, `"num_experts": 128`, `"num_local_experts": 128`, 1),
			MoEConfig{Experts: 128, TopK: 8, Intermediate: 768, NormTopK: true, Sparse: all(48)}, false, true},
		{"qwen2_moe sparse step 2, mlp_only_layers", strings.Replace(cfgQwen2MoE, `"decoder_sparse_step": 1`, `"decoder_sparse_step": 2, "mlp_only_layers": [3, 7], "num_hidden_layers": 8`, 1),
			MoEConfig{Experts: 60, TopK: 4, Intermediate: 1408, SharedIntermediate: 5632, Sparse: []bool{false, true, false, false, false, true, false, false}}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseConfig([]byte(tc.json))
			if err != nil {
				t.Fatal(err)
			}
			if c.MoE == nil {
				t.Fatal("no MoE config")
			}
			got := *c.MoE
			if got.Experts != tc.want.Experts || got.TopK != tc.want.TopK || got.Intermediate != tc.want.Intermediate ||
				got.NormTopK != tc.want.NormTopK || got.SharedIntermediate != tc.want.SharedIntermediate || !slices.Equal(got.Sparse, tc.want.Sparse) {
				t.Fatalf("MoE = %+v, want %+v", got, tc.want)
			}
			if c.QKVBias != tc.qkvBias || c.QKNorm != tc.qkNorm || c.SlidingWindow != 0 {
				t.Fatalf("qkv bias %v, qk norm %v, window %d; want %v, %v, 0", c.QKVBias, c.QKNorm, c.SlidingWindow, tc.qkvBias, tc.qkNorm)
			}
		})
	}
	c, err := ParseConfig([]byte(cfgLlama3))
	if err != nil || c.MoE != nil {
		t.Fatalf("llama: MoE %v, err %v; want none", c.MoE, err)
	}
}

func TestMoEConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name, json, field, msg string
	}{
		{"top-k above experts", strings.Replace(cfgMixtral, `"num_experts_per_tok": 2`, `"num_experts_per_tok": 9`, 1), "num_experts_per_tok", "not in [1, 8]"},
		{"no experts", strings.Replace(cfgQwen3MoE, `"num_experts": 128`, `"num_experts": 0`, 1), "num_experts", "not in"},
		{"two expert counts", strings.Replace(cfgQwen3MoE, `"num_experts": 128`, `"num_experts": 128, "num_local_experts": 64`, 1), "num_experts", "num_local_experts 64"},
		{"mlp_only_layers out of range", strings.Replace(cfgQwen3MoE, `"mlp_only_layers": []`, `"mlp_only_layers": [48]`, 1), "mlp_only_layers", "layer 48"},
		{"experts on a dense family", strings.Replace(cfgLlama3, `"vocab_size"`, `"num_local_experts": 8, "vocab_size"`, 1), "num_local_experts", "not a mixture-of-experts family"},
		{"qwen2_moe sliding without layer_types", strings.Replace(cfgQwen2MoE, `"use_sliding_window": false`, `"use_sliding_window": true`, 1), "use_sliding_window", "layer_types"},
		{"deepseek v3", `{"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3"}`, "model_type", "multi-head latent attention"},
		{"deepseek v2 by architecture", `{"architectures": ["DeepseekV2ForCausalLM"]}`, "architectures", "grouped"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.json))
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("ParseConfig error = %v (%T), want a *ConfigError", err, err)
			}
			if ce.Field != tc.field || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("ParseConfig error = %v (field %q), want field %q and %q", err, ce.Field, tc.field, tc.msg)
			}
			if strings.HasPrefix(tc.name, "deepseek") && !errors.Is(err, ErrUnsupportedArchitecture) {
				t.Fatalf("%v does not wrap ErrUnsupportedArchitecture", err)
			}
		})
	}
}

// TestRouteTokens holds RouteTokens to a float64 reference (softmax, the k
// largest, renormalised) on random logits, and checks its tie rule: equal
// probabilities go to the lower expert index first.
func TestRouteTokens(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for _, shape := range []struct{ E, k int }{{8, 2}, {60, 4}, {128, 8}, {4, 4}} {
		for _, norm := range []bool{false, true} {
			const T = 50
			logits := make([]float32, T*shape.E)
			for i := range logits {
				logits[i] = float32(3 * r.NormFloat64())
			}
			routes := RouteTokens(logits, shape.E, shape.k, norm)
			for tok, rt := range routes {
				row := logits[tok*shape.E : (tok+1)*shape.E]
				mx := math.Inf(-1)
				for _, v := range row {
					mx = max(mx, float64(v))
				}
				p := make([]float64, shape.E)
				var sum float64
				for i, v := range row {
					p[i] = math.Exp(float64(v) - mx)
					sum += p[i]
				}
				order := make([]int, shape.E)
				for i := range order {
					order[i] = i
					p[i] /= sum
				}
				slices.SortStableFunc(order, func(a, b int) int {
					if p[a] > p[b] {
						return -1
					} else if p[a] < p[b] {
						return 1
					}
					return 0
				})
				want := order[:shape.k]
				var s float64
				for _, e := range want {
					s += p[e]
				}
				if !slices.Equal(rt.Expert, want) {
					// A float32 near-tie may order two experts otherwise;
					// random normal logits have none at this size.
					t.Fatalf("E %d k %d token %d: experts %v, want %v", shape.E, shape.k, tok, rt.Expert, want)
				}
				for j, e := range want {
					w := p[e]
					if norm {
						w /= s
					}
					if d := math.Abs(float64(rt.Weight[j])-w) / w; !(d < 1e-5) {
						t.Fatalf("E %d k %d token %d slot %d: weight %v, want %v (rel %.2g)", shape.E, shape.k, tok, j, rt.Weight[j], w, d)
					}
				}
			}
		}
	}
	// Ties: all equal, and two equal leaders.
	rt := RouteTokens([]float32{1, 1, 1, 1, 1, 1}, 6, 3, true)[0]
	if !slices.Equal(rt.Expert, []int{0, 1, 2}) {
		t.Fatalf("all equal: experts %v, want [0 1 2]", rt.Expert)
	}
	for _, w := range rt.Weight {
		if math.Abs(float64(w)-1.0/3) > 1e-7 {
			t.Fatalf("all equal: weights %v, want 1/3 each", rt.Weight)
		}
	}
	if rt := RouteTokens([]float32{0, 2, 1, 2}, 4, 2, false)[0]; !slices.Equal(rt.Expert, []int{1, 3}) || rt.Weight[0] != rt.Weight[1] {
		t.Fatalf("two equal leaders: %+v, want experts [1 3] of equal weight", rt)
	}
}

// mixtralFixture is transformers' Mixtral conformance fixture
// (internal/hfcheck), stored per expert as Hub checkpoints are.
var mixtralFixture = filepath.Join("..", "internal", "hfcheck", "testdata", "mixtral-e8top2-gqa3-bf16")

// TestMoEFusedLayout loads the Mixtral fixture as stored (Mixtral's
// block_sparse_moe, experts.E.w1/w2/w3) and rewritten in transformers 5's
// in-memory layout (mlp.gate; mlp.experts.gate_up_proj [E, 2·IE, H] and
// down_proj [E, H, IE]), and requires bitwise equal logits: moeFused maps
// both onto the same matrices.
func TestMoEFusedLayout(t *testing.T) {
	cfg, err := LoadConfig(filepath.Join(mixtralFixture, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	stored, err := safetensors.OpenDir(mixtralFixture)
	if err != nil {
		t.Fatal(err)
	}
	defer stored.Close()
	fused := fuseMixtral(t, cfg, stored)
	be := cpu.New(2)
	var b Batch
	b.Add(1, 0, 5, 17, 200, 3, 99, 42, 7)
	b.AllLogits = true
	var out [2][]float32
	for i, ck := range []*safetensors.Checkpoint{stored, fused} {
		m, err := LoadCheckpoint(cfg, ck, be, LoadOptions{})
		if err != nil {
			t.Fatalf("checkpoint %d: %v", i, err)
		}
		lg, err := m.Forward(&b, NewDenseCache(be, cfg))
		m.Close()
		if err != nil {
			t.Fatal(err)
		}
		out[i] = lg.Data
	}
	for i := range out[0] {
		if math.Float32bits(out[0][i]) != math.Float32bits(out[1][i]) {
			t.Fatalf("logit %d: fused layout %v, per-expert %v", i, out[1][i], out[0][i])
		}
	}
}

// fuseMixtral rewrites a Mixtral checkpoint's experts into transformers
// 5's fused layout, in memory.
func fuseMixtral(t *testing.T, cfg *Config, ck *safetensors.Checkpoint) *safetensors.Checkpoint {
	t.Helper()
	E, IE, H := cfg.MoE.Experts, cfg.MoE.Intermediate, cfg.Hidden
	var tensors []safetensors.Tensor
	add := func(name string, dtype safetensors.DType, shape []int, b []byte) {
		tensors = append(tensors, safetensors.Tensor{TensorInfo: safetensors.TensorInfo{Name: name, DType: dtype, Shape: shape}, Data: b})
	}
	tensor := func(name string) safetensors.Tensor {
		x, err := ck.Tensor(name)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	for _, name := range ck.Names() {
		if strings.Contains(name, "block_sparse_moe.experts.") {
			continue
		}
		x := tensor(name)
		add(strings.Replace(name, "block_sparse_moe.gate", "mlp.gate", 1), x.DType, x.Shape, x.Data)
	}
	for l := range cfg.Layers {
		p := "model.layers." + strconv.Itoa(l) + "."
		var gu, down []byte
		var dt safetensors.DType
		for e := range E {
			q := p + "block_sparse_moe.experts." + strconv.Itoa(e) + "."
			w1, w3, w2 := tensor(q+"w1.weight"), tensor(q+"w3.weight"), tensor(q+"w2.weight")
			gu = append(append(gu, w1.Data...), w3.Data...)
			down = append(down, w2.Data...)
			dt = w1.DType
		}
		add(p+"mlp.experts.gate_up_proj", dt, []int{E, 2 * IE, H}, gu)
		add(p+"mlp.experts.down_proj", dt, []int{E, H, IE}, down)
	}
	var file bytes.Buffer
	if err := safetensors.Write(&file, tensors, nil); err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.OpenBytes("fused.safetensors", file.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	out, err := safetensors.NewCheckpoint(f)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
