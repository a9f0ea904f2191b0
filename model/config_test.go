package model

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// Config snippets in the formats the public checkpoints of each family use
// (fields not read by this package trimmed).
const (
	cfgGocoder = `{
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "bos_token_id": 0, "dtype": "bfloat16",
  "eos_token_id": 1, "head_dim": 128, "hidden_act": "silu", "hidden_size": 512, "intermediate_size": 1536,
  "max_position_embeddings": 8192, "mlp_bias": false, "model_type": "llama", "num_attention_heads": 4,
  "num_hidden_layers": 6, "num_key_value_heads": 2, "pad_token_id": null, "rms_norm_eps": 1e-05,
  "rope_parameters": {"rope_theta": 500000.0, "rope_type": "default"},
  "tie_word_embeddings": true, "transformers_version": "5.17.0", "vocab_size": 8192}`
	cfgLlama2 = `{
  "architectures": ["LlamaForCausalLM"], "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
  "hidden_size": 4096, "intermediate_size": 11008, "max_position_embeddings": 4096, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32, "pretraining_tp": 1,
  "rms_norm_eps": 1e-05, "rope_scaling": null, "tie_word_embeddings": false, "torch_dtype": "float16",
  "vocab_size": 32000}`
	cfgLlama3 = `{
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "bos_token_id": 128000, "eos_token_id": 128001,
  "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 8192,
  "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05, "rope_scaling": null, "rope_theta": 500000.0, "tie_word_embeddings": false,
  "torch_dtype": "bfloat16", "vocab_size": 128256}`
	cfgLlama31 = `{
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "bos_token_id": 128000,
  "eos_token_id": [128001, 128008, 128009], "hidden_act": "silu", "hidden_size": 4096,
  "intermediate_size": 14336, "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16", "vocab_size": 128256}`
	cfgLlama32 = `{
  "architectures": ["LlamaForCausalLM"], "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 64,
  "hidden_act": "silu", "hidden_size": 2048, "intermediate_size": 8192, "max_position_embeddings": 131072,
  "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05, "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
  "original_max_position_embeddings": 8192, "rope_type": "llama3"}, "rope_theta": 500000.0,
  "tie_word_embeddings": true, "torch_dtype": "bfloat16", "vocab_size": 128256}`
	cfgMistral01 = `{
  "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
  "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mistral",
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
  "rope_theta": 10000.0, "sliding_window": 4096, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "vocab_size": 32000}`
	cfgMistral03 = `{
  "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2, "head_dim": null,
  "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 32768,
  "model_type": "mistral", "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "sliding_window": null, "tie_word_embeddings": false,
  "torch_dtype": "bfloat16", "vocab_size": 32768}`
	cfgMistralNemo = `{
  "architectures": ["MistralForCausalLM"], "head_dim": 128, "hidden_act": "silu", "hidden_size": 5120,
  "intermediate_size": 14336, "max_position_embeddings": 1024000, "model_type": "mistral",
  "num_attention_heads": 32, "num_hidden_layers": 40, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
  "rope_theta": 1000000.0, "sliding_window": null, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "vocab_size": 131072}`
	cfgQwen25 = `{
  "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
  "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 896, "intermediate_size": 4864,
  "max_position_embeddings": 32768, "max_window_layers": 24, "model_type": "qwen2", "num_attention_heads": 14,
  "num_hidden_layers": 24, "num_key_value_heads": 2, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
  "sliding_window": 32768, "tie_word_embeddings": true, "torch_dtype": "bfloat16", "use_cache": true,
  "use_mrope": false, "use_sliding_window": false, "vocab_size": 151936}`
	cfgQwen3 = `{
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 1024,
  "intermediate_size": 3072, "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
  "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8, "rms_norm_eps": 1e-06,
  "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null, "tie_word_embeddings": true,
  "torch_dtype": "bfloat16", "use_sliding_window": false, "vocab_size": 151936}`
)

func TestParseConfig(t *testing.T) {
	llama31Scaling := &RopeScaling{Type: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositions: 8192}
	for _, tc := range []struct {
		name string
		json string
		want Config
	}{
		{"gocoder rope_parameters", cfgGocoder, Config{ModelType: "llama", Architecture: "LlamaForCausalLM",
			Hidden: 512, Intermediate: 1536, Layers: 6, Heads: 4, KVHeads: 2, HeadDim: 128, Vocab: 8192, MaxPositions: 8192,
			RMSNormEps: 1e-5, RopeTheta: 500000, TieWordEmbeddings: true, DType: "bfloat16", BOSTokenID: 0, EOSTokenIDs: []int{1}}},
		{"llama 2 default theta, MHA", cfgLlama2, Config{ModelType: "llama", Architecture: "LlamaForCausalLM",
			Hidden: 4096, Intermediate: 11008, Layers: 32, Heads: 32, KVHeads: 32, HeadDim: 128, Vocab: 32000, MaxPositions: 4096,
			RMSNormEps: 1e-5, RopeTheta: 10000, DType: "float16", BOSTokenID: 1, EOSTokenIDs: []int{2}}},
		{"llama 3", cfgLlama3, Config{ModelType: "llama", Architecture: "LlamaForCausalLM",
			Hidden: 4096, Intermediate: 14336, Layers: 32, Heads: 32, KVHeads: 8, HeadDim: 128, Vocab: 128256, MaxPositions: 8192,
			RMSNormEps: 1e-5, RopeTheta: 500000, DType: "bfloat16", BOSTokenID: 128000, EOSTokenIDs: []int{128001}}},
		{"llama 3.1 llama3 scaling, eos list", cfgLlama31, Config{ModelType: "llama", Architecture: "LlamaForCausalLM",
			Hidden: 4096, Intermediate: 14336, Layers: 32, Heads: 32, KVHeads: 8, HeadDim: 128, Vocab: 128256, MaxPositions: 131072,
			RMSNormEps: 1e-5, RopeTheta: 500000, RopeScaling: llama31Scaling, DType: "bfloat16", BOSTokenID: 128000, EOSTokenIDs: []int{128001, 128008, 128009}}},
		{"llama 3.2 tied, head_dim", cfgLlama32, Config{ModelType: "llama", Architecture: "LlamaForCausalLM",
			Hidden: 2048, Intermediate: 8192, Layers: 16, Heads: 32, KVHeads: 8, HeadDim: 64, Vocab: 128256, MaxPositions: 131072,
			RMSNormEps: 1e-5, RopeTheta: 500000, RopeScaling: &RopeScaling{Type: "llama3", Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositions: 8192},
			TieWordEmbeddings: true, DType: "bfloat16", BOSTokenID: 128000, EOSTokenIDs: []int{128001}}},
		{"mistral 0.1 sliding window", cfgMistral01, Config{ModelType: "mistral", Architecture: "MistralForCausalLM",
			Hidden: 4096, Intermediate: 14336, Layers: 32, Heads: 32, KVHeads: 8, HeadDim: 128, Vocab: 32000, MaxPositions: 32768,
			RMSNormEps: 1e-5, RopeTheta: 10000, SlidingWindow: 4096, DType: "bfloat16", BOSTokenID: 1, EOSTokenIDs: []int{2}}},
		{"mistral 0.3 null window and head_dim", cfgMistral03, Config{ModelType: "mistral", Architecture: "MistralForCausalLM",
			Hidden: 4096, Intermediate: 14336, Layers: 32, Heads: 32, KVHeads: 8, HeadDim: 128, Vocab: 32768, MaxPositions: 32768,
			RMSNormEps: 1e-5, RopeTheta: 1e6, DType: "bfloat16", BOSTokenID: 1, EOSTokenIDs: []int{2}}},
		{"mistral nemo head_dim != hidden/heads", cfgMistralNemo, Config{ModelType: "mistral", Architecture: "MistralForCausalLM",
			Hidden: 5120, Intermediate: 14336, Layers: 40, Heads: 32, KVHeads: 8, HeadDim: 128, Vocab: 131072, MaxPositions: 1024000,
			RMSNormEps: 1e-5, RopeTheta: 1e6, DType: "bfloat16", BOSTokenID: -1}},
		{"qwen2.5 qkv bias, window unused", cfgQwen25, Config{ModelType: "qwen2", Architecture: "Qwen2ForCausalLM",
			Hidden: 896, Intermediate: 4864, Layers: 24, Heads: 14, KVHeads: 2, HeadDim: 64, Vocab: 151936, MaxPositions: 32768,
			RMSNormEps: 1e-6, RopeTheta: 1e6, TieWordEmbeddings: true, QKVBias: true, DType: "bfloat16", BOSTokenID: 151643, EOSTokenIDs: []int{151643}}},
		{"qwen3 qk norm", cfgQwen3, Config{ModelType: "qwen3", Architecture: "Qwen3ForCausalLM",
			Hidden: 1024, Intermediate: 3072, Layers: 28, Heads: 16, KVHeads: 8, HeadDim: 128, Vocab: 151936, MaxPositions: 40960,
			RMSNormEps: 1e-6, RopeTheta: 1e6, TieWordEmbeddings: true, QKNorm: true, DType: "bfloat16", BOSTokenID: 151643, EOSTokenIDs: []int{151645}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseConfig([]byte(tc.json))
			if err != nil {
				t.Fatalf("ParseConfig: %v", err)
			}
			want := tc.want
			want.LayerWindows = make([]int, want.Layers)
			if want.SlidingWindow > 0 {
				for i := range want.LayerWindows {
					want.LayerWindows[i] = want.SlidingWindow
				}
			}
			if !reflect.DeepEqual(*got, want) {
				t.Errorf("ParseConfig =\n%+v\nwant\n%+v", *got, want)
				if got.RopeScaling != nil {
					t.Errorf("RopeScaling = %+v", *got.RopeScaling)
				}
			}
		})
	}
}

func TestParseConfigWindows(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(string) string
		base string
		want []int
	}{
		{"qwen2 use_sliding_window from max_window_layers", func(s string) string {
			return strings.NewReplacer(`"use_sliding_window": false`, `"use_sliding_window": true`, `"max_window_layers": 24`, `"max_window_layers": 22`).Replace(s)
		}, cfgQwen25, append(make([]int, 22), 32768, 32768)},
		{"layer_types", func(s string) string {
			return strings.Replace(s, `"sliding_window": 4096,`, `"sliding_window": 4096, "layer_types": [`+strings.Repeat(`"sliding_attention","full_attention",`, 15)+`"sliding_attention","full_attention"],`, 1)
		}, cfgMistral01, func() []int {
			w := make([]int, 32)
			for i := 0; i < 32; i += 2 {
				w[i] = 4096
			}
			return w
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseConfig([]byte(tc.edit(tc.base)))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c.LayerWindows, tc.want) {
				t.Errorf("LayerWindows = %v, want %v", c.LayerWindows, tc.want)
			}
		})
	}
}

func TestParseConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name, json, field, msg string
	}{
		{"unknown architecture", strings.Replace(cfgLlama3, `"LlamaForCausalLM"`, `"FalconForCausalLM"`, 1), "architectures", "supported: LlamaForCausalLM (llama), MistralForCausalLM (mistral), Qwen2ForCausalLM (qwen2), Qwen3ForCausalLM (qwen3), Phi3ForCausalLM (phi3), GemmaForCausalLM (gemma)"},
		{"unknown model_type", strings.Replace(cfgLlama3, `"model_type": "llama"`, `"model_type": "gemma"`, 1), "model_type", `"gemma"`},
		{"mismatched model_type", strings.Replace(cfgLlama3, `"model_type": "llama"`, `"model_type": "qwen2"`, 1), "model_type", "does not match"},
		{"no family", `{"hidden_size": 8}`, "model_type", "missing"},
		{"missing hidden_size", strings.Replace(cfgLlama3, `"hidden_size": 4096,`, ``, 1), "hidden_size", "missing"},
		{"string hidden_size", strings.Replace(cfgLlama3, `"hidden_size": 4096`, `"hidden_size": "4096"`, 1), "hidden_size", "string"},
		{"negative heads", strings.Replace(cfgLlama3, `"num_attention_heads": 32`, `"num_attention_heads": -32`, 1), "num_attention_heads", "not in"},
		{"huge vocab", strings.Replace(cfgLlama3, `"vocab_size": 128256`, `"vocab_size": 12825600000`, 1), "vocab_size", "not in"},
		{"kv heads do not divide", strings.Replace(cfgLlama3, `"num_key_value_heads": 8`, `"num_key_value_heads": 5`, 1), "num_key_value_heads", "multiple"},
		{"hidden not multiple of heads", strings.Replace(cfgLlama3, `"hidden_size": 4096`, `"hidden_size": 4097`, 1), "head_dim", "multiple"},
		{"odd head_dim", strings.Replace(cfgLlama32, `"head_dim": 64`, `"head_dim": 63`, 1), "head_dim", "odd"},
		{"gelu", strings.Replace(cfgLlama3, `"silu"`, `"gelu"`, 1), "hidden_act", "gelu"},
		{"yarn factor 0", strings.Replace(strings.Replace(cfgLlama31, `"llama3"`, `"yarn"`, 1), `"factor": 8.0`, `"factor": 0`, 1), "rope_scaling.factor", "not a finite factor > 0"},
		{"yarn negative beta", strings.Replace(strings.Replace(cfgLlama31, `"llama3"`, `"yarn"`, 1), `"factor": 8.0`, `"factor": 8.0, "beta_fast": -4`, 1), "rope_scaling", "beta_fast"},
		{"yarn negative attention factor", strings.Replace(strings.Replace(cfgLlama31, `"llama3"`, `"yarn"`, 1), `"factor": 8.0`, `"factor": 8.0, "attention_factor": -1`, 1), "rope_scaling.attention_factor", "not a finite factor > 0"},
		{"dynamic", strings.Replace(cfgLlama31, `"llama3"`, `"dynamic"`, 1), "rope_scaling.rope_type", `"dynamic" is not supported (supported: default, linear, llama3, longrope, yarn)`},
		{"smollm3 no_rope_layers length", strings.Replace(strings.Replace(cfgLlama3, `"model_type": "llama"`, `"model_type": "smollm3", "no_rope_layers": [1, 0]`, 1), `"LlamaForCausalLM"`, `"SmolLM3ForCausalLM"`, 1), "no_rope_layers", "2 entries for 32 layers"},
		{"smollm3 no_rope_layers value", strings.Replace(strings.Replace(cfgLlama3, `"model_type": "llama"`, `"model_type": "smollm3", "no_rope_layers": [`+strings.Repeat("1, ", 31)+`2]`, 1), `"LlamaForCausalLM"`, `"SmolLM3ForCausalLM"`, 1), "no_rope_layers", "layer 31: 2"},
		{"dynamic old spelling", strings.Replace(cfgLlama2, `"rope_scaling": null`, `"rope_scaling": {"type": "dynamic", "factor": 2.0}`, 1), "rope_scaling.rope_type", "dynamic"},
		{"llama3 missing factors", strings.Replace(cfgLlama31, `"low_freq_factor": 1.0,`, ``, 1), "rope_scaling", "low_freq_factor"},
		{"llama3 equal factors", strings.Replace(cfgLlama31, `"high_freq_factor": 4.0`, `"high_freq_factor": 1.0`, 1), "rope_scaling", "low_freq_factor < high_freq_factor"},
		{"zero factor", strings.Replace(cfgLlama31, `"factor": 8.0`, `"factor": 0`, 1), "rope_scaling.factor", "factor"},
		{"per-layer-type rope_parameters", strings.Replace(cfgGocoder, `{"rope_theta": 500000.0, "rope_type": "default"}`, `{"full_attention": {"rope_theta": 1e6}}`, 1), "rope_parameters", `per-layer-type parameters ("full_attention") are not supported`},
		{"bad theta", strings.Replace(cfgLlama3, `"rope_theta": 500000.0`, `"rope_theta": 0.5`, 1), "rope_theta", "base"},
		{"zero eps", strings.Replace(cfgLlama3, `"rms_norm_eps": 1e-05`, `"rms_norm_eps": 0`, 1), "rms_norm_eps", "(0, 1)"},
		{"zero window", strings.Replace(cfgMistral01, `"sliding_window": 4096`, `"sliding_window": 0`, 1), "sliding_window", "positive"},
		{"bad layer type", strings.Replace(cfgMistral01, `"sliding_window": 4096,`, `"sliding_window": 4096, "layer_types": ["chunked_attention"],`, 1), "layer_types", "1 entries for 32 layers"},
		{"bad eos", strings.Replace(cfgLlama3, `"eos_token_id": 128001`, `"eos_token_id": "x"`, 1), "eos_token_id", "token id"},
		{"not json", `{"model_type": `, "", "unexpected end"},
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
		})
	}
	_, err := ParseConfig([]byte(strings.Replace(cfgLlama3, `"LlamaForCausalLM"`, `"FalconForCausalLM"`, 1)))
	if !errors.Is(err, ErrUnsupportedArchitecture) {
		t.Errorf("unknown architecture error %v does not wrap ErrUnsupportedArchitecture", err)
	}
}

func TestLoadConfigNamesFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(p, []byte(strings.Replace(cfgLlama3, `"num_key_value_heads": 8`, `"num_key_value_heads": 7`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadConfig(p)
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "num_key_value_heads") {
		t.Fatalf("LoadConfig error = %v, want it to name the file and field", err)
	}
}

// TestInvFreq checks the RoPE frequencies against float64 evaluations of
// transformers' formulas, and the three llama3 bands on Llama 3.1's config.
func TestInvFreq(t *testing.T) {
	for _, js := range []string{cfgGocoder, cfgLlama2, cfgLlama31, cfgLlama32, strings.Replace(cfgLlama2, `"rope_scaling": null`, `"rope_scaling": {"type": "linear", "factor": 4.0}`, 1)} {
		c, err := ParseConfig([]byte(js))
		if err != nil {
			t.Fatal(err)
		}
		got, want := c.InvFreq(), refInvFreq(c)
		if len(got) != c.HeadDim/2 {
			t.Fatalf("%d frequencies for head_dim %d", len(got), c.HeadDim)
		}
		for i := range got {
			// float32 steps against float64: a few ulps.
			if rel := math.Abs(float64(got[i])-want[i]) / want[i]; rel > 4e-7 {
				t.Errorf("%s: inv_freq[%d] = %v, want %v (rel %.1e)", c.ModelType, i, got[i], want[i], rel)
			}
		}
	}
	c, _ := ParseConfig([]byte(cfgLlama31))
	inv := c.InvFreq()
	plain, _ := ParseConfig([]byte(cfgLlama3)) // same theta and head_dim, no scaling
	base := plain.InvFreq()
	var high, low, medium int
	for i := range inv {
		switch r := float64(inv[i]) / float64(base[i]); {
		case r == 1:
			high++
		case math.Abs(r-1/8.0) < 1e-6:
			low++
		default:
			medium++
			if !(r > 1/8.0 && r < 1) {
				t.Errorf("inv_freq[%d] scaled by %v, outside (1/8, 1)", i, r)
			}
		}
	}
	if high == 0 || low == 0 || medium == 0 {
		t.Errorf("llama3 bands: %d high, %d medium, %d low frequencies; want all three", high, medium, low)
	}
}

// TestNewFamilyConfigs checks what Phi-3's and Gemma's configs set, and
// that their unsupported variants and Gemma 2/3 are refused naming what is
// missing.
func TestNewFamilyConfigs(t *testing.T) {
	const phi3 = `{"architectures":["Phi3ForCausalLM"],"model_type":"phi3","hidden_size":3072,"intermediate_size":8192,
		"num_hidden_layers":4,"num_attention_heads":32,"num_key_value_heads":32,"vocab_size":32064,"rms_norm_eps":1e-5,
		"max_position_embeddings":4096,"original_max_position_embeddings":4096,"sliding_window":2047,"hidden_act":"silu"%s}`
	c, err := ParseConfig([]byte(strings.Replace(phi3, "%s", "", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if !c.FusedQKV || c.HeadDim != 96 || c.GeGLU || c.NormPlusOne || c.EmbedScale != 0 || c.RopeScaling != nil {
		t.Errorf("phi3: %+v", c)
	}
	for i, w := range c.LayerWindows {
		if w != 2047 {
			t.Errorf("phi3 layer %d: window %d, want 2047 on every layer", i, w)
		}
	}
	// Phi-3-mini-128k's longrope: factor 131072/4096 = 32 from the
	// positions, attention factor √(1 + ln 32 / ln 4096).
	short, long := make([]string, 48), make([]string, 48)
	for i := range short {
		short[i], long[i] = "1.0", fmt.Sprint(1+i)
	}
	lr := strings.Replace(strings.Replace(phi3, `"max_position_embeddings":4096`, `"max_position_embeddings":131072`, 1), "%s",
		`,"rope_scaling":{"type":"longrope","short_factor":[`+strings.Join(short, ",")+`],"long_factor":[`+strings.Join(long, ",")+`]}`, 1)
	c, err = ParseConfig([]byte(lr))
	if err != nil {
		t.Fatal(err)
	}
	s := c.RopeScaling
	if want := math.Sqrt(1 + math.Log(32)/math.Log(4096)); s == nil || s.Type != "longrope" || s.Factor != 32 || s.OriginalMaxPositions != 4096 || math.Abs(s.AttentionFactor-want) > 1e-15 {
		t.Fatalf("longrope: %+v, want factor 32, original 4096, attention factor %v", s, want)
	}
	base, longInv := c.InvFreq(), c.InvFreqLong()
	for i := range base {
		ref := 1 / math.Pow(c.RopeTheta, float64(2*i)/96)
		if rel := math.Abs(float64(base[i])-ref) / ref; rel > 4e-7 {
			t.Errorf("short inv_freq[%d] = %v, want %v", i, base[i], ref)
		}
		if rel := math.Abs(float64(longInv[i])-ref/float64(1+i)) / (ref / float64(1+i)); rel > 4e-7 {
			t.Errorf("long inv_freq[%d] = %v, want %v", i, longInv[i], ref/float64(1+i))
		}
	}

	const gemma = `{"architectures":["GemmaForCausalLM"],"model_type":"gemma","hidden_size":2048,"intermediate_size":16384,
		"num_hidden_layers":2,"num_attention_heads":8,"num_key_value_heads":1,"head_dim":256,"vocab_size":256000,
		"rms_norm_eps":1e-6,"hidden_act":"gelu","hidden_activation":"gelu_pytorch_tanh","torch_dtype":"bfloat16"}`
	c, err = ParseConfig([]byte(gemma))
	if err != nil {
		t.Fatal(err)
	}
	// √2048 = 45.2548 is 45.25 in bfloat16, as GemmaModel's normalizer.
	if !c.GeGLU || !c.NormPlusOne || c.EmbedScale != 45.25 || c.FusedQKV || c.SlidingWindow != 0 {
		t.Errorf("gemma: %+v", c)
	}
	c, err = ParseConfig([]byte(strings.Replace(gemma, `"torch_dtype":"bfloat16"`, `"torch_dtype":"float32"`, 1)))
	if err != nil || c.EmbedScale != float32(math.Sqrt(2048)) {
		t.Errorf("gemma float32: embed scale %v, %v; want %v", c.EmbedScale, err, float32(math.Sqrt(2048)))
	}

	for _, tc := range []struct{ name, js, want string }{
		{"gemma exact gelu", strings.Replace(gemma, `"hidden_activation":"gelu_pytorch_tanh",`, "", 1), "erf GELU"},
		{"gemma bidirectional", strings.Replace(gemma, `"torch_dtype"`, `"use_bidirectional_attention":true,"torch_dtype"`, 1), "bidirectional"},
		{"partial rotary of an odd R", strings.Replace(phi3, "%s", `,"partial_rotary_factor":0.7`, 1), "even, positive"},
		{"partial rotary factor above 1", strings.Replace(phi3, "%s", `,"partial_rotary_factor":1.5`, 1), "(0, 1]"},
		{"partial rotary twice, differing", strings.Replace(phi3, "%s", `,"partial_rotary_factor":0.75,"rope_parameters":{"rope_type":"default","rope_theta":10000.0,"partial_rotary_factor":0.5}`, 1), "another partial_rotary_factor"},
		{"partial rotary longrope of head_dim/2", strings.Replace(phi3, "%s", `,"partial_rotary_factor":0.75,"rope_scaling":{"type":"longrope","short_factor":[`+strings.Join(short, ",")+`],"long_factor":[`+strings.Join(long, ",")+`]}`, 1), "rotary dimensions/2"},
		{"partial rotary outside phi3", strings.Replace(cfgLlama2, `"rope_scaling": null`, `"rope_scaling": null, "partial_rotary_factor": 0.5`, 1), "only Phi-3"},
		{"longrope short", strings.Replace(phi3, "%s", `,"rope_scaling":{"type":"longrope","short_factor":[1.0],"long_factor":[1.0]}`, 1), "head_dim/2"},
		{"gemma3 multimodal without text_config", `{"architectures":["Gemma3ForConditionalGeneration"]}`, "nests its text model's config"},
		{"mistral3 of another text family", `{"model_type":"mistral3","text_config":{"model_type":"llama"}}`, `want ["mistral"]`},
		{"gemma3 multimodal text field", `{"model_type":"gemma3","text_config":{"num_hidden_layers":-1}}`, "text_config.num_hidden_layers"},
		{"phi-2", `{"model_type":"phi","architectures":["PhiForCausalLM"]}`, "LayerNorm"},
		{"gemma4", `{"model_type":"gemma4","architectures":["Gemma4ForConditionalGeneration"]}`, "per-layer input embeddings"},
		{"llama4", `{"model_type":"llama4","architectures":["Llama4ForConditionalGeneration"]}`, "chunked attention"},
	} {
		_, err := ParseConfig([]byte(tc.js))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one saying %q", tc.name, err, tc.want)
		}
	}
}

// TestPartialRotaryConfig checks Phi-4-mini's partial rotary embeddings:
// R = int(head_dim·factor) from the top level or rope_parameters, longrope
// factors of R/2 entries, and InvFreq's R/2 frequencies over R followed by
// exact zeros (the pass-through pairs), with linear and longrope scaling.
func TestPartialRotaryConfig(t *testing.T) {
	// Phi-4-mini: hidden 3072 over 24 heads (D = 128), factor 0.75.
	const phi4 = `{"architectures":["Phi3ForCausalLM"],"model_type":"phi3","hidden_size":3072,"intermediate_size":8192,
		"num_hidden_layers":2,"num_attention_heads":24,"num_key_value_heads":8,"vocab_size":200064,"rms_norm_eps":1e-5,
		"max_position_embeddings":131072,"original_max_position_embeddings":4096,"sliding_window":262144,"hidden_act":"silu",
		"partial_rotary_factor":0.75,"rope_theta":10000.0%s}`
	short, long := make([]string, 48), make([]string, 48)
	for i := range short {
		short[i], long[i] = fmt.Sprint(1+0.01*float64(i)), fmt.Sprint(1+i)
	}
	for _, tc := range []struct {
		name, js string
		div      func(i int) float64 // InvFreq's divisor of entry i < R/2
		long     func(i int) float64 // InvFreqLong's, nil: none
	}{
		{"default", strings.Replace(phi4, "%s", "", 1), func(int) float64 { return 1 }, nil},
		{"rope_parameters", strings.Replace(strings.Replace(phi4, `"partial_rotary_factor":0.75,`, "", 1), "%s",
			`,"rope_parameters":{"rope_type":"default","rope_theta":10000.0,"partial_rotary_factor":0.75}`, 1), func(int) float64 { return 1 }, nil},
		{"linear", strings.Replace(phi4, "%s", `,"rope_scaling":{"type":"linear","factor":4.0}`, 1), func(int) float64 { return 4 }, nil},
		{"longrope", strings.Replace(phi4, "%s", `,"rope_scaling":{"type":"longrope","short_factor":[`+strings.Join(short, ",")+`],"long_factor":[`+strings.Join(long, ",")+`]}`, 1),
			func(i int) float64 { return 1 + 0.01*float64(i) }, func(i int) float64 { return float64(1 + i) }},
	} {
		c, err := ParseConfig([]byte(tc.js))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if c.HeadDim != 128 || c.RotaryDim != 96 || c.RotaryDims() != 96 {
			t.Fatalf("%s: head_dim %d, RotaryDim %d, RotaryDims %d; want 128, 96, 96", tc.name, c.HeadDim, c.RotaryDim, c.RotaryDims())
		}
		check := func(what string, got []float32, div func(int) float64) {
			if len(got) != 64 {
				t.Fatalf("%s %s: %d frequencies, want D/2 = 64", tc.name, what, len(got))
			}
			for i, g := range got {
				want := 0.0
				if i < 48 {
					want = 1 / math.Pow(10000, float64(2*i)/96) / div(i)
				}
				if !(math.Abs(float64(g)-want) <= 4e-7*want) {
					t.Errorf("%s %s: inv_freq[%d] = %v, want %v", tc.name, what, i, g, want)
				}
			}
		}
		check("short", c.InvFreq(), tc.div)
		if tc.long != nil {
			check("long", c.InvFreqLong(), tc.long)
		}
	}
	// A factor of 1 (or none) is the whole head: RotaryDim stays 0.
	c, err := ParseConfig([]byte(strings.Replace(strings.Replace(phi4, "0.75", "1.0", 1), "%s", "", 1)))
	if err != nil || c.RotaryDim != 0 || c.RotaryDims() != 128 {
		t.Fatalf("factor 1: %v, RotaryDim %d", err, c.RotaryDim)
	}
}

// TestGraniteOlmo2Gemma3Configs checks the session-17 families' configs,
// written after their released checkpoints' (granite-3.1-8b-instruct,
// OLMo-2-1124-7B, gemma-3-1b-it: their published values, shortened to the
// fields read), and the refusals of what they do not run.
func TestGraniteOlmo2Gemma3Configs(t *testing.T) {
	const granite = `{"architectures":["GraniteForCausalLM"],"model_type":"granite","hidden_size":4096,"intermediate_size":12800,
		"num_hidden_layers":40,"num_attention_heads":32,"num_key_value_heads":8,"vocab_size":49155,"rms_norm_eps":1e-5,
		"rope_theta":10000000.0,"hidden_act":"silu","attention_bias":false,"mlp_bias":false,"tie_word_embeddings":true,
		"embedding_multiplier":12.0,"attention_multiplier":0.0078125,"residual_multiplier":0.22,"logits_scaling":16.0}`
	c, err := ParseConfig([]byte(granite))
	if err != nil {
		t.Fatal(err)
	}
	if c.EmbedScale != 12 || c.AttnScale != 0.0078125 || c.ResidualScale != 0.22 || c.LogitScale != 1.0/16 || c.HeadDim != 128 || c.PostNorms {
		t.Errorf("granite: %+v", c)
	}
	const olmo2 = `{"architectures":["Olmo2ForCausalLM"],"model_type":"olmo2","hidden_size":4096,"intermediate_size":11008,
		"num_hidden_layers":32,"num_attention_heads":32,"num_key_value_heads":32,"vocab_size":100352,"rms_norm_eps":1e-6,
		"rope_theta":500000,"rope_scaling":null,"hidden_act":"silu","attention_bias":false,"tie_word_embeddings":false}`
	if c, err = ParseConfig([]byte(olmo2)); err != nil {
		t.Fatal(err)
	}
	if !c.PostNorms || !c.QKNormFull || c.QKNorm || c.SandwichNorms || c.QKVBias {
		t.Errorf("olmo2: %+v", c)
	}
	const gemma3 = `{"architectures":["Gemma3ForCausalLM"],"model_type":"gemma3_text","hidden_size":1152,"intermediate_size":6912,
		"num_hidden_layers":26,"num_attention_heads":4,"num_key_value_heads":1,"head_dim":256,"vocab_size":262144,"rms_norm_eps":1e-6,
		"hidden_activation":"gelu_pytorch_tanh","query_pre_attn_scalar":256,"sliding_window":512,"sliding_window_pattern":6,
		"rope_theta":1000000,"rope_local_base_freq":10000,"rope_scaling":null,"attn_logit_softcapping":null,
		"final_logit_softcapping":null,"torch_dtype":"bfloat16"%s}`
	if c, err = ParseConfig([]byte(fmt.Sprintf(gemma3, ""))); err != nil {
		t.Fatal(err)
	}
	if !c.PostNorms || !c.SandwichNorms || !c.QKNorm || !c.NormPlusOne || !c.GeGLU || c.AttnScale != 0 ||
		c.RopeTheta != 1e6 || c.LocalRopeTheta != 1e4 || c.RopeScaling != nil || c.EmbedScale != 34 {
		t.Errorf("gemma3: %+v", c)
	}
	for i, w := range c.LayerWindows {
		if want := map[bool]int{true: 0, false: 512}[(i+1)%6 == 0]; w != want {
			t.Errorf("gemma3 layer %d: window %d, want %d", i, w, want)
		}
	}
	// transformers 5's spelling: layer_types and rope_parameters by layer type.
	c, err = ParseConfig([]byte(fmt.Sprintf(gemma3, `,"query_pre_attn_scalar":168,"layer_types":[`+
		strings.Repeat(`"sliding_attention","full_attention",`, 12)+`"sliding_attention","full_attention"],
		"rope_parameters":{"full_attention":{"rope_type":"linear","factor":8.0,"rope_theta":1000000.0},
		"sliding_attention":{"rope_type":"default","rope_theta":10000.0}}`)))
	if err != nil {
		t.Fatal(err)
	}
	if c.AttnScale != 1/math.Sqrt(168) || c.RopeScaling == nil || c.RopeScaling.Type != "linear" || c.RopeScaling.Factor != 8 ||
		c.LocalRopeTheta != 1e4 || c.LayerWindows[0] != 512 || c.LayerWindows[1] != 0 {
		t.Errorf("gemma3 nested: %+v", c)
	}
	for _, tc := range []struct{ name, js, want string }{
		{"granite negative multiplier", strings.Replace(granite, `"residual_multiplier":0.22`, `"residual_multiplier":-1`, 1), "residual_multiplier"},
		{"gemma3 sliding layers scaled", fmt.Sprintf(gemma3, `,"rope_parameters":{"full_attention":{"rope_type":"default","rope_theta":1e6},
			"sliding_attention":{"rope_type":"linear","factor":2.0,"rope_theta":1e4}}`), "sliding layers"},
		{"gemma3 unknown layer type", fmt.Sprintf(gemma3, `,"rope_parameters":{"chunked_attention":{"rope_type":"default"}}`), "chunked_attention"},
		{"nested rope outside gemma3", strings.Replace(olmo2, `"rope_scaling":null`, `"rope_parameters":{"full_attention":{"rope_type":"default"}}`, 1), "per-layer-type"},
	} {
		_, err := ParseConfig([]byte(tc.js))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one saying %q", tc.name, err, tc.want)
		}
	}
}

// TestGemma2Config checks Gemma 2's configs, written after the released
// gemma-2-2b's and gemma-2-27b's (their published values, from memory of
// transformers 4.42's config.json, not fetched here; shortened to the
// fields read): the soft-caps, query_pre_attn_scalar, the four norms
// without q/k norms, one RoPE base, the alternating windows (sliding
// first) where layer_types is absent, and transformers 5.17's defaults
// for absent fields (caps 50 and 30, window 4096, tied embeddings) against
// null ones (no cap); then the caps' validation, and Gemma 3's caps, which
// now load too.
func TestGemma2Config(t *testing.T) {
	const gemma2 = `{"architectures":["Gemma2ForCausalLM"],"attention_bias":false,"attn_logit_softcapping":50.0,
		"bos_token_id":2,"eos_token_id":[1,107],"final_logit_softcapping":30.0,"head_dim":256,"hidden_act":"gelu_pytorch_tanh",
		"hidden_activation":"gelu_pytorch_tanh","hidden_size":2304,"intermediate_size":9216,"max_position_embeddings":8192,
		"model_type":"gemma2","num_attention_heads":8,"num_hidden_layers":26,"num_key_value_heads":4,"pad_token_id":0,
		"query_pre_attn_scalar":256,"rms_norm_eps":1e-06,"rope_theta":10000.0,"sliding_window":4096,"torch_dtype":"float32",
		"vocab_size":256000%s}`
	c, err := ParseConfig([]byte(fmt.Sprintf(gemma2, "")))
	if err != nil {
		t.Fatal(err)
	}
	if c.AttnSoftcap != 50 || c.FinalSoftcap != 30 || c.AttnScale != 0 || !c.PostNorms || !c.SandwichNorms || c.QKNorm ||
		!c.NormPlusOne || !c.GeGLU || c.LocalRopeTheta != 0 || c.RopeTheta != 1e4 || c.EmbedScale != 48 || !c.TieWordEmbeddings ||
		c.HeadDim != 256 || c.KVHeads != 4 || c.QKVBias || c.OBias {
		t.Errorf("gemma-2-2b: %+v", c)
	}
	for i, w := range c.LayerWindows {
		if want := map[bool]int{true: 4096, false: 0}[i%2 == 0]; w != want {
			t.Errorf("gemma-2-2b layer %d: window %d, want %d", i, w, want)
		}
	}
	// gemma-2-27b: query_pre_attn_scalar 144 = hidden/heads ≠ head_dim 128.
	c, err = ParseConfig([]byte(strings.NewReplacer(`"head_dim":256`, `"head_dim":128`, `"hidden_size":2304`, `"hidden_size":4608`,
		`"num_attention_heads":8`, `"num_attention_heads":32`, `"num_key_value_heads":4`, `"num_key_value_heads":16`,
		`"query_pre_attn_scalar":256`, `"query_pre_attn_scalar":144`, `"torch_dtype":"float32"`, `"torch_dtype":"bfloat16"`).Replace(fmt.Sprintf(gemma2, ""))))
	if err != nil {
		t.Fatal(err)
	}
	if c.AttnScale != 1.0/12 || c.AttnSoftcap != 50 || c.FinalSoftcap != 30 || c.EmbedScale != 68 { // √4608 = 67.88 in bfloat16
		t.Errorf("gemma-2-27b: AttnScale %v, caps %v %v, embed scale %v", c.AttnScale, c.AttnSoftcap, c.FinalSoftcap, c.EmbedScale)
	}
	// Absent fields take Gemma2Config's defaults; null ones are off.
	bare := strings.NewReplacer(`"attn_logit_softcapping":50.0,`, "", `"final_logit_softcapping":30.0,`, "", `"sliding_window":4096,`, "").Replace(fmt.Sprintf(gemma2, ""))
	if c, err = ParseConfig([]byte(bare)); err != nil {
		t.Fatal(err)
	}
	if c.AttnSoftcap != 50 || c.FinalSoftcap != 30 || c.LayerWindows[0] != 4096 || c.LayerWindows[1] != 0 {
		t.Errorf("gemma2 without caps or window: caps %v %v, windows %v", c.AttnSoftcap, c.FinalSoftcap, c.LayerWindows[:2])
	}
	nulls := strings.NewReplacer(`"attn_logit_softcapping":50.0`, `"attn_logit_softcapping":null`, `"final_logit_softcapping":30.0`, `"final_logit_softcapping":null`).Replace(fmt.Sprintf(gemma2, ""))
	if c, err = ParseConfig([]byte(nulls)); err != nil {
		t.Fatal(err)
	}
	if c.AttnSoftcap != 0 || c.FinalSoftcap != 0 {
		t.Errorf("gemma2 with null caps: %v %v, want 0 0", c.AttnSoftcap, c.FinalSoftcap)
	}
	// transformers 5's spelling: layer_types and rope_parameters.
	c, err = ParseConfig([]byte(fmt.Sprintf(strings.Replace(gemma2, `"rope_theta":10000.0,`, "", 1), `,"num_hidden_layers":3,
		"layer_types":["full_attention","sliding_attention","sliding_attention"],"rope_parameters":{"rope_type":"default","rope_theta":20000.0},
		"tie_word_embeddings":false`)))
	if err != nil {
		t.Fatal(err)
	}
	if c.RopeTheta != 2e4 || c.TieWordEmbeddings || !slices.Equal(c.LayerWindows, []int{0, 4096, 4096}) {
		t.Errorf("gemma2 layer_types: rope %v, tied %v, windows %v", c.RopeTheta, c.TieWordEmbeddings, c.LayerWindows)
	}
	for _, tc := range []struct{ name, field, value string }{
		{"negative attention cap", "attn_logit_softcapping", "-50"},
		{"zero attention cap", "attn_logit_softcapping", "0"},
		{"string final cap", "final_logit_softcapping", `"30"`},
		{"huge final cap", "final_logit_softcapping", "1e300"},
		{"zero final cap", "final_logit_softcapping", "0.0"},
	} {
		js := fmt.Sprintf(gemma2, fmt.Sprintf(`,%q:%s`, tc.field, tc.value))
		_, err := ParseConfig([]byte(js))
		if err == nil || !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), "soft-cap") {
			t.Errorf("%s: err = %v, want a refusal naming %s", tc.name, err, tc.field)
		}
	}
	// Gemma 3 (null caps by default) takes caps where a config sets them.
	const gemma3 = `{"architectures":["Gemma3ForCausalLM"],"model_type":"gemma3_text","hidden_size":1152,"intermediate_size":6912,
		"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":1,"head_dim":256,"vocab_size":262144,"rms_norm_eps":1e-6,
		"sliding_window":512%s}`
	if c, err = ParseConfig([]byte(fmt.Sprintf(gemma3, ""))); err != nil || c.AttnSoftcap != 0 || c.FinalSoftcap != 0 {
		t.Errorf("gemma3 without caps: %v, caps %v %v", err, c.AttnSoftcap, c.FinalSoftcap)
	}
	if c, err = ParseConfig([]byte(fmt.Sprintf(gemma3, `,"attn_logit_softcapping":50.0,"final_logit_softcapping":30.0`))); err != nil || c.AttnSoftcap != 50 || c.FinalSoftcap != 30 {
		t.Errorf("gemma3 with caps: %v, caps %v %v", err, c.AttnSoftcap, c.FinalSoftcap)
	}
	// Llama ignores the fields, as LlamaConfig does.
	if c, err = ParseConfig([]byte(strings.Replace(cfgLlama2, `"rope_scaling": null`, `"rope_scaling": null, "attn_logit_softcapping": 50.0`, 1))); err != nil || c.AttnSoftcap != 0 {
		t.Errorf("llama with attn_logit_softcapping: %v, cap %v", err, c.AttnSoftcap)
	}
	if err := c.RefuseAttnSoftcap("x"); err != nil {
		t.Errorf("RefuseAttnSoftcap without a cap: %v", err)
	}
	c.AttnSoftcap = 50
	if err := c.RefuseAttnSoftcap("the GPU"); !errors.Is(err, ErrAttnSoftcap) || !strings.Contains(err.Error(), "the GPU") || !strings.Contains(err.Error(), "soft-capping") {
		t.Errorf("RefuseAttnSoftcap: %v", err)
	}
}

// TestYarnOlmo3SmolLM3SeedOSSConfigs checks the families and RoPE rule of
// session 27 on configs written after the released checkpoints' (from
// memory of their config.json, shortened to the fields read; not fetched
// here): OLMo 3 (transformers 4.57's spelling: rope_scaling yarn for the
// full layers beside layer_types; the sliding layers unscaled at
// Olmo3Config's default_theta), SmolLM3 (no_rope_layers, its default
// interval where absent), Seed-OSS (head_dim 128 and q/k/v biases by
// default, o without), and Qwen3 with its model card's yarn.
func TestYarnOlmo3SmolLM3SeedOSSConfigs(t *testing.T) {
	olmo3 := `{"architectures":["Olmo3ForCausalLM"],"model_type":"olmo3","hidden_size":4096,"intermediate_size":11008,
		"num_hidden_layers":32,"num_attention_heads":32,"num_key_value_heads":32,"vocab_size":100278,"rms_norm_eps":1e-6,
		"max_position_embeddings":65536,"rope_theta":500000,"sliding_window":4096,"attention_bias":false,
		"rope_scaling":{"attention_factor":1.2079441541679836,"beta_fast":32,"beta_slow":1,"factor":8.0,
		"original_max_position_embeddings":8192,"rope_type":"yarn"},
		"layer_types":[` + strings.TrimSuffix(strings.Repeat(`"sliding_attention","sliding_attention","sliding_attention","full_attention",`, 8), ",") + `]}`
	c, err := ParseConfig([]byte(olmo3))
	if err != nil {
		t.Fatal(err)
	}
	s := c.RopeScaling
	if !c.PostNorms || !c.QKNormFull || s == nil || s.Type != "yarn" || s.Factor != 8 || s.OriginalMaxPositions != 8192 ||
		s.AttentionFactor != 1.2079441541679836 || s.BetaFast != 32 || s.BetaSlow != 1 || s.NoTruncate ||
		c.RopeTheta != 5e5 || c.LocalRopeTheta != 5e5 {
		t.Errorf("olmo3: %+v, scaling %+v", c, s)
	}
	for i, w := range c.LayerWindows {
		if want := map[bool]int{true: 0, false: 4096}[(i+1)%4 == 0]; w != want {
			t.Errorf("olmo3 layer %d: window %d, want %d", i, w, want)
		}
	}
	// Without layer_types and sliding_window: Olmo3Config's pattern and window.
	c, err = ParseConfig([]byte(strings.Replace(strings.Replace(olmo3, `"sliding_window":4096,`, ``, 1), `"layer_types":[`, `"unused":[`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if c.LayerWindows[0] != 4096 || c.LayerWindows[3] != 0 || c.LayerWindows[4] != 4096 {
		t.Errorf("olmo3 defaults: windows %v", c.LayerWindows)
	}

	smol := `{"architectures":["SmolLM3ForCausalLM"],"model_type":"smollm3","hidden_size":2048,"intermediate_size":11008,
		"num_hidden_layers":36,"num_attention_heads":16,"num_key_value_heads":4,"vocab_size":128256,"rms_norm_eps":1e-6,
		"max_position_embeddings":65536,"rope_theta":5000000.0,"rope_scaling":null,
		"use_sliding_window":false,"sliding_window":null,"tie_word_embeddings":true,"attention_bias":false,"mlp_bias":false,
		"no_rope_layers":[` + strings.TrimSuffix(strings.Repeat(`1,1,1,0,`, 9), ",") + `]}`
	if c, err = ParseConfig([]byte(smol)); err != nil {
		t.Fatal(err)
	}
	for i, no := range c.NoRoPE {
		if no != ((i+1)%4 == 0) || c.LayerWindows[i] != 0 {
			t.Errorf("smollm3 layer %d: no RoPE %v, window %d", i, no, c.LayerWindows[i])
		}
	}
	if c.RopeTheta != 5e6 || c.HeadDim != 128 || c.QKVBias || c.OBias || !c.TieWordEmbeddings {
		t.Errorf("smollm3: %+v", c)
	}
	// Without no_rope_layers: every no_rope_layer_interval-th layer; with a
	// window, the NoPE layers slide (SmolLM3Config's layer_types).
	c, err = ParseConfig([]byte(strings.Replace(strings.Replace(smol, `"no_rope_layers"`, `"no_rope_layer_interval":3,"unused"`, 1),
		`"use_sliding_window":false,"sliding_window":null`, `"use_sliding_window":true,"sliding_window":2048`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	for i, no := range c.NoRoPE {
		w := map[bool]int{true: 2048, false: 0}[(i+1)%3 == 0]
		if no != ((i+1)%3 == 0) || c.LayerWindows[i] != w {
			t.Errorf("smollm3 interval 3, layer %d: no RoPE %v, window %d", i, no, c.LayerWindows[i])
		}
	}

	seed := `{"architectures":["SeedOssForCausalLM"],"model_type":"seed_oss","hidden_size":5120,"intermediate_size":27648,
		"num_hidden_layers":64,"num_attention_heads":80,"num_key_value_heads":8,"vocab_size":155136,"rms_norm_eps":1e-6,
		"max_position_embeddings":524288,"rope_theta":10000000.0,"rope_scaling":{"rope_type":"default"},"tie_word_embeddings":false}`
	if c, err = ParseConfig([]byte(seed)); err != nil {
		t.Fatal(err)
	}
	if c.HeadDim != 128 || !c.QKVBias || c.OBias || c.MLPBias || c.RopeScaling != nil {
		t.Errorf("seed_oss: %+v", c)
	}

	// Qwen3's model card: "rope_scaling": {"rope_type": "yarn", "factor": 4.0,
	// "original_max_position_embeddings": 32768}; the attention factor
	// 0.1·ln 4 + 1.
	qwen3 := `{"architectures":["Qwen3ForCausalLM"],"model_type":"qwen3","hidden_size":4096,"intermediate_size":12288,
		"num_hidden_layers":36,"num_attention_heads":32,"num_key_value_heads":8,"head_dim":128,"vocab_size":151936,
		"rms_norm_eps":1e-6,"max_position_embeddings":40960,"rope_theta":1000000,
		"rope_scaling":{"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":32768}}`
	if c, err = ParseConfig([]byte(qwen3)); err != nil {
		t.Fatal(err)
	}
	if s := c.RopeScaling; s == nil || s.Type != "yarn" || s.Factor != 4 || s.OriginalMaxPositions != 32768 ||
		math.Abs(c.RopeAttentionFactor()-(0.1*math.Log(4)+1)) > 1e-15 {
		t.Errorf("qwen3 yarn: %+v", c.RopeScaling)
	}
	inv := c.InvFreq()
	// The fastest pairs keep θ^(-2i/D); the slowest are divided by 4.
	if base := c.baseInvFreq(); inv[0] != base[0] || math.Abs(float64(inv[63])-float64(base[63])/4) > 1e-6*float64(base[63]) {
		t.Errorf("qwen3 yarn frequencies: first %g (base %g), last %g (base %g / 4)", inv[0], base[0], inv[63], base[63])
	}
	// Without factor: max_position_embeddings over the original.
	if c, err = ParseConfig([]byte(strings.Replace(qwen3, `"factor":4.0,`, ``, 1))); err != nil {
		t.Fatal(err)
	}
	if c.RopeScaling.Factor != 40960.0/32768 {
		t.Errorf("qwen3 yarn without factor: %g", c.RopeScaling.Factor)
	}
}

// TestMultimodalTextConfigs parses the text models of multimodal
// checkpoints' configs written after the published ones (from memory,
// shortened; not fetched here): gemma-3-4b-it's sparse text_config over
// Gemma3TextConfig's defaults, Mistral-Small-3.1's, and Qwen2.5-VL-7B's
// flat 4.5x config with its "mrope" RoPE (1-D on text).
func TestMultimodalTextConfigs(t *testing.T) {
	gemma := `{"architectures":["Gemma3ForConditionalGeneration"],"model_type":"gemma3","boi_token_index":255999,
		"eoi_token_index":256000,"eos_token_id":[1,106],"image_token_index":262144,"mm_tokens_per_image":256,
		"text_config":{"hidden_size":2560,"intermediate_size":10240,"model_type":"gemma3_text","num_hidden_layers":34,
		"rope_scaling":{"factor":8.0,"rope_type":"linear"},"sliding_window":1024},"torch_dtype":"bfloat16",
		"vision_config":{"hidden_size":1152,"model_type":"siglip_vision_model","patch_size":14}}`
	c, err := ParseConfig([]byte(gemma))
	if err != nil {
		t.Fatal(err)
	}
	if c.Wrapper != "gemma3" || c.ModelType != "gemma3_text" || c.Heads != 8 || c.KVHeads != 4 || c.HeadDim != 256 ||
		c.Vocab != 262208 || c.Layers != 34 || c.RopeTheta != 1e6 || c.LocalRopeTheta != 1e4 || c.RopeScaling == nil ||
		c.RopeScaling.Factor != 8 || c.AttnScale != 0 || !c.GeGLU || c.DType != "bfloat16" ||
		!slices.Equal(c.EOSTokenIDs, []int{1, 106}) || c.BOSTokenID != 2 {
		t.Errorf("gemma-3-4b-it: %+v", c)
	}
	for i, w := range c.LayerWindows {
		if want := map[bool]int{true: 0, false: 1024}[(i+1)%6 == 0]; w != want {
			t.Errorf("gemma-3-4b-it layer %d: window %d, want %d", i, w, want)
		}
	}
	mistral := `{"architectures":["Mistral3ForConditionalGeneration"],"image_token_index":10,"model_type":"mistral3",
		"multimodal_projector_bias":false,"projector_hidden_act":"gelu","spatial_merge_size":2,
		"text_config":{"head_dim":128,"hidden_act":"silu","hidden_size":5120,"intermediate_size":32768,
		"max_position_embeddings":131072,"model_type":"mistral","num_attention_heads":32,"num_hidden_layers":40,
		"num_key_value_heads":8,"rms_norm_eps":1e-05,"rope_theta":1000000000.0,"sliding_window":null,"vocab_size":131072},
		"torch_dtype":"bfloat16","vision_config":{"model_type":"pixtral"}}`
	if c, err = ParseConfig([]byte(mistral)); err != nil {
		t.Fatal(err)
	}
	if c.Wrapper != "mistral3" || c.ModelType != "mistral" || c.HeadDim != 128 || c.RopeTheta != 1e9 || c.SlidingWindow != 0 ||
		c.TieWordEmbeddings || c.Vocab != 131072 {
		t.Errorf("Mistral-Small-3.1: %+v", c)
	}
	qwen := `{"architectures":["Qwen2_5_VLForConditionalGeneration"],"bos_token_id":151643,"eos_token_id":151645,
		"image_token_id":151655,"hidden_act":"silu","hidden_size":3584,"intermediate_size":18944,
		"max_position_embeddings":128000,"max_window_layers":28,"model_type":"qwen2_5_vl","num_attention_heads":28,
		"num_hidden_layers":28,"num_key_value_heads":4,"rms_norm_eps":1e-06,"rope_theta":1000000.0,"sliding_window":32768,
		"tie_word_embeddings":false,"torch_dtype":"bfloat16","use_sliding_window":false,
		"vision_config":{"depth":32,"hidden_size":1280},"rope_scaling":{"type":"mrope","mrope_section":[16,24,24]},
		"vocab_size":152064}`
	if c, err = ParseConfig([]byte(qwen)); err != nil {
		t.Fatal(err)
	}
	if c.Wrapper != "qwen2_5_vl" || c.ModelType != "qwen2" || c.Heads != 28 || c.KVHeads != 4 || c.HeadDim != 128 ||
		!c.QKVBias || c.OBias || c.RopeScaling != nil || c.SlidingWindow != 0 || c.EOSTokenIDs[0] != 151645 {
		t.Errorf("Qwen2.5-VL-7B: %+v", c)
	}
}

// TestGLM4Exaone4Configs parses configs written after GLM-4-9B-0414's and
// EXAONE-4.0-32B's and -1.2B's (from memory, shortened; not fetched here):
// GLM-4's partial rotary (0.5 by default) on interleaved pairs, four norms
// and q/k/v biases; EXAONE 4's post-norm blocks with per-head q/k norms,
// its "LLLG" pattern beside layer_types, NoPE on the global layers where a
// window is set and RoPE everywhere where none is.
func TestGLM4Exaone4Configs(t *testing.T) {
	glm := `{"architectures":["Glm4ForCausalLM"],"attention_bias":true,"eos_token_id":[151329,151336,151338],
		"head_dim":128,"hidden_act":"silu","hidden_size":4096,"intermediate_size":13696,"max_position_embeddings":32768,
		"model_type":"glm4","num_attention_heads":32,"num_hidden_layers":40,"num_key_value_heads":2,
		"pad_token_id":151329,"partial_rotary_factor":0.5,"rms_norm_eps":1e-05,"rope_theta":10000.0,
		"tie_word_embeddings":false,"torch_dtype":"bfloat16","vocab_size":151552}`
	c, err := ParseConfig([]byte(glm))
	if err != nil {
		t.Fatal(err)
	}
	if c.RotaryDims() != 64 || !c.RopeInterleaved || !c.FusedGateUp || c.FusedQKV || !c.QKVBias || c.OBias ||
		!c.PostNorms || !c.SandwichNorms || c.NormPlusOne || c.KVHeads != 2 {
		t.Errorf("GLM-4-9B-0414: %+v", c)
	}
	// Without partial_rotary_factor: Glm4Config's 0.5; given as 1: the whole head.
	if c, err = ParseConfig([]byte(strings.Replace(glm, `"partial_rotary_factor":0.5,`, ``, 1))); err != nil || c.RotaryDims() != 64 {
		t.Errorf("GLM-4 without partial_rotary_factor: R %d, %v", c.RotaryDims(), err)
	}
	if c, err = ParseConfig([]byte(strings.Replace(glm, `"partial_rotary_factor":0.5,`, `"partial_rotary_factor":1.0,`, 1))); err != nil || c.RotaryDims() != 128 {
		t.Errorf("GLM-4 with partial_rotary_factor 1: R %d, %v", c.RotaryDims(), err)
	}

	exa := `{"architectures":["Exaone4ForCausalLM"],"bos_token_id":1,"eos_token_id":361,"head_dim":128,"hidden_act":"silu",
		"hidden_size":5120,"intermediate_size":27392,"max_position_embeddings":131072,"model_type":"exaone4",
		"num_attention_heads":40,"num_hidden_layers":64,"num_key_value_heads":8,"rms_norm_eps":1e-05,
		"rope_scaling":{"factor":16.0,"high_freq_factor":4.0,"low_freq_factor":1.0,"original_max_position_embeddings":8192,
		"rope_type":"llama3"},"rope_theta":1000000,"sliding_window":4096,"sliding_window_pattern":"LLLG",
		"layer_types":[` + strings.TrimSuffix(strings.Repeat(`"sliding_attention","sliding_attention","sliding_attention","full_attention",`, 16), ",") + `],
		"tie_word_embeddings":false,"vocab_size":102400}`
	if c, err = ParseConfig([]byte(exa)); err != nil {
		t.Fatal(err)
	}
	if !c.QKNorm || !c.PostNorms || c.SandwichNorms || c.QKVBias || c.RopeScaling == nil || c.RopeScaling.Type != "llama3" {
		t.Errorf("EXAONE-4.0-32B: %+v", c)
	}
	for i := range c.Layers {
		global := (i+1)%4 == 0
		if c.NoRoPE[i] != global || (c.LayerWindows[i] == 0) != global {
			t.Errorf("EXAONE-4.0-32B layer %d: no RoPE %v, window %d", i, c.NoRoPE[i], c.LayerWindows[i])
		}
	}
	// The 1.2B: no window, so every layer global with RoPE.
	small := strings.Replace(strings.Replace(exa, `"sliding_window":4096,"sliding_window_pattern":"LLLG",`, `"sliding_window":null,"sliding_window_pattern":null,`, 1),
		`"layer_types":[`, `"unused":[`, 1)
	if c, err = ParseConfig([]byte(small)); err != nil {
		t.Fatal(err)
	}
	if c.NoRoPE != nil || c.SlidingWindow != 0 {
		t.Errorf("EXAONE-4.0-1.2B: no RoPE %v, window %d", c.NoRoPE, c.SlidingWindow)
	}
	// The string pattern without layer_types is refused, not guessed.
	if _, err := ParseConfig([]byte(strings.Replace(exa, `"layer_types":[`, `"unused":[`, 1))); err == nil || !strings.Contains(err.Error(), "sliding_window_pattern") {
		t.Errorf(`EXAONE 4 "LLLG" without layer_types: err = %v`, err)
	}
}
