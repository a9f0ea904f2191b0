package model

import (
	"bytes"
	"errors"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/backend/cpu"
	"github.com/bitdecode/bitdecode/model/safetensors"
)

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// synthFamilies are small random models of every supported family and
// feature, each checked against refForward.
var synthFamilies = []struct {
	name   string
	dtype  safetensors.DType
	config string
}{
	{"llama tied bf16", safetensors.BF16, `{"architectures":["LlamaForCausalLM"],"model_type":"llama",
		"hidden_size":64,"intermediate_size":96,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,
		"vocab_size":100,"rms_norm_eps":1e-5,"rope_theta":10000.0,"tie_word_embeddings":true,"hidden_act":"silu"}`},
	{"llama3 rope scaling via rope_parameters", safetensors.BF16, `{"architectures":["LlamaForCausalLM"],"model_type":"llama",
		"hidden_size":64,"intermediate_size":96,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":1,
		"vocab_size":100,"rms_norm_eps":1e-5,"tie_word_embeddings":true,
		"rope_parameters":{"rope_type":"llama3","rope_theta":10000.0,"factor":8.0,"low_freq_factor":1.0,"high_freq_factor":4.0,"original_max_position_embeddings":16}}`},
	{"llama biases untied f16 linear scaling", safetensors.F16, `{"architectures":["LlamaForCausalLM"],"model_type":"llama",
		"hidden_size":64,"intermediate_size":96,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":4,
		"vocab_size":100,"rms_norm_eps":1e-6,"rope_theta":500000.0,"attention_bias":true,"mlp_bias":true,"tie_word_embeddings":false,
		"rope_scaling":{"type":"linear","factor":2.0}}`},
	{"mistral sliding window f32", safetensors.F32, `{"architectures":["MistralForCausalLM"],"model_type":"mistral",
		"hidden_size":64,"intermediate_size":96,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,
		"vocab_size":100,"rms_norm_eps":1e-5,"rope_theta":1000000.0,"sliding_window":4,"tie_word_embeddings":false}`},
	{"qwen2 qkv bias", safetensors.BF16, `{"architectures":["Qwen2ForCausalLM"],"model_type":"qwen2",
		"hidden_size":64,"intermediate_size":96,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,
		"vocab_size":100,"rms_norm_eps":1e-6,"rope_theta":1000000.0,"tie_word_embeddings":true,
		"use_sliding_window":false,"sliding_window":32768,"max_window_layers":2}`},
	{"qwen3 qk norm explicit head_dim", safetensors.BF16, `{"architectures":["Qwen3ForCausalLM"],"model_type":"qwen3",
		"hidden_size":64,"intermediate_size":96,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":32,
		"vocab_size":100,"rms_norm_eps":1e-6,"rope_theta":1000000,"attention_bias":false,"tie_word_embeddings":true,
		"sliding_window":null,"use_sliding_window":false}`},
	{"phi3 fused qkv gate_up sliding window", safetensors.BF16, `{"architectures":["Phi3ForCausalLM"],"model_type":"phi3",
		"hidden_size":64,"intermediate_size":96,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,
		"vocab_size":100,"rms_norm_eps":1e-5,"rope_theta":10000.0,"hidden_act":"silu","sliding_window":5,
		"max_position_embeddings":4096,"original_max_position_embeddings":4096,"rope_scaling":null,"tie_word_embeddings":false}`},
	{"phi3 longrope past the original context f32", safetensors.F32, `{"architectures":["Phi3ForCausalLM"],"model_type":"phi3",
		"hidden_size":64,"intermediate_size":96,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":4,
		"vocab_size":100,"rms_norm_eps":1e-5,"rope_theta":10000.0,"hidden_act":"silu","sliding_window":null,
		"max_position_embeddings":64,"original_max_position_embeddings":8,"tie_word_embeddings":false,
		"rope_scaling":{"type":"longrope","short_factor":[1.0,1.1,1.3,1.8,2.5,4.0,6.0,9.0],
		"long_factor":[1.2,1.9,3.1,5.2,8.5,13.0,21.0,40.0]}}`},
	{"phi3 partial rotary 0.75 gqa head_dim 64 bf16", safetensors.BF16, `{"architectures":["Phi3ForCausalLM"],"model_type":"phi3",
		"hidden_size":128,"intermediate_size":96,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":64,
		"vocab_size":100,"rms_norm_eps":1e-5,"rope_theta":10000.0,"hidden_act":"silu","sliding_window":null,
		"partial_rotary_factor":0.75,"max_position_embeddings":4096,"original_max_position_embeddings":4096,"tie_word_embeddings":false}`},
	{"phi3 partial rotary 0.5 longrope past the original context f32", safetensors.F32, `{"architectures":["Phi3ForCausalLM"],"model_type":"phi3",
		"hidden_size":64,"intermediate_size":96,"num_hidden_layers":2,"num_attention_heads":2,"num_key_value_heads":2,
		"vocab_size":100,"rms_norm_eps":1e-5,"rope_theta":10000.0,"hidden_act":"silu","sliding_window":null,
		"max_position_embeddings":64,"original_max_position_embeddings":8,"tie_word_embeddings":false,
		"rope_parameters":{"rope_type":"longrope","rope_theta":10000.0,"partial_rotary_factor":0.5,"short_factor":[1.0,1.1,1.3,1.8,2.5,4.0,6.0,9.0],
		"long_factor":[1.2,1.9,3.1,5.2,8.5,13.0,21.0,40.0]}}`},
	{"phi4-mini-like partial rotary 0.75 longrope head_dim 128 gqa bf16", safetensors.BF16, `{"architectures":["Phi3ForCausalLM"],"model_type":"phi3",
		"hidden_size":256,"intermediate_size":96,"num_hidden_layers":2,"num_attention_heads":2,"num_key_value_heads":1,
		"vocab_size":100,"rms_norm_eps":1e-5,"rope_theta":10000.0,"hidden_act":"silu","sliding_window":null,"partial_rotary_factor":0.75,
		"max_position_embeddings":64,"original_max_position_embeddings":6,"tie_word_embeddings":true,
		"rope_scaling":{"type":"longrope","short_factor":[1.00,1.05,1.10,1.15,1.20,1.25,1.30,1.35,1.40,1.45,1.50,1.55,1.60,1.65,1.70,1.75,1.80,1.85,1.90,1.95,2.00,2.05,2.10,2.15,2.20,2.25,2.30,2.35,2.40,2.45,2.50,2.55,2.60,2.65,2.70,2.75,2.80,2.85,2.90,2.95,3.00,3.05,3.10,3.15,3.20,3.25,3.30,3.35],"long_factor":[1.0,1.5,2.0,2.5,3.0,3.5,4.0,4.5,5.0,5.5,6.0,6.5,7.0,7.5,8.0,8.5,9.0,9.5,10.0,10.5,11.0,11.5,12.0,12.5,13.0,13.5,14.0,14.5,15.0,15.5,16.0,16.5,17.0,17.5,18.0,18.5,19.0,19.5,20.0,20.5,21.0,21.5,22.0,22.5,23.0,23.5,24.0,24.5]}}`},
	{"gemma mqa head_dim 32 geglu bf16", safetensors.BF16, `{"architectures":["GemmaForCausalLM"],"model_type":"gemma",
		"hidden_size":64,"intermediate_size":96,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":1,"head_dim":32,
		"vocab_size":100,"rms_norm_eps":1e-6,"rope_theta":10000.0,"hidden_act":"gelu","hidden_activation":"gelu_pytorch_tanh",
		"attention_bias":false,"tie_word_embeddings":true,"torch_dtype":"bfloat16"}`},
	{"gemma f32 attention bias", safetensors.F32, `{"architectures":["GemmaForCausalLM"],"model_type":"gemma",
		"hidden_size":48,"intermediate_size":80,"num_hidden_layers":2,"num_attention_heads":2,"num_key_value_heads":2,"head_dim":24,
		"vocab_size":100,"rms_norm_eps":1e-6,"rope_theta":10000.0,"hidden_act":"gelu_pytorch_tanh",
		"attention_bias":true,"tie_word_embeddings":true}`},
	{"granite multipliers tied bf16", safetensors.BF16, `{"architectures":["GraniteForCausalLM"],"model_type":"granite",
		"hidden_size":64,"intermediate_size":96,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,
		"vocab_size":100,"rms_norm_eps":1e-5,"rope_theta":10000.0,"hidden_act":"silu","tie_word_embeddings":true,
		"embedding_multiplier":12.0,"attention_multiplier":0.015625,"residual_multiplier":0.22,"logits_scaling":8.0}`},
	{"granite biases untied f32", safetensors.F32, `{"architectures":["GraniteForCausalLM"],"model_type":"granite",
		"hidden_size":64,"intermediate_size":96,"num_hidden_layers":2,"num_attention_heads":2,"num_key_value_heads":2,
		"vocab_size":100,"rms_norm_eps":1e-6,"rope_theta":10000.0,"attention_bias":true,"mlp_bias":true,"tie_word_embeddings":false,
		"embedding_multiplier":3.0,"attention_multiplier":0.3,"residual_multiplier":0.5,"logits_scaling":2.5}`},
	{"olmo2 post norms full qk norm bf16", safetensors.BF16, `{"architectures":["Olmo2ForCausalLM"],"model_type":"olmo2",
		"hidden_size":64,"intermediate_size":96,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,
		"vocab_size":100,"rms_norm_eps":1e-6,"rope_theta":500000.0,"hidden_act":"silu","attention_bias":false,"tie_word_embeddings":false}`},
	{"olmo2 mha attention bias tied f32", safetensors.F32, `{"architectures":["Olmo2ForCausalLM"],"model_type":"olmo2",
		"hidden_size":64,"intermediate_size":96,"num_hidden_layers":2,"num_attention_heads":2,
		"vocab_size":100,"rms_norm_eps":1e-5,"rope_theta":10000.0,"attention_bias":true,"tie_word_embeddings":true}`},
	{"gemma3 sliding and global layers nested rope_parameters bf16", safetensors.BF16, `{"architectures":["Gemma3ForCausalLM"],"model_type":"gemma3_text",
		"hidden_size":64,"intermediate_size":96,"num_hidden_layers":3,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":32,
		"vocab_size":100,"rms_norm_eps":1e-6,"hidden_activation":"gelu_pytorch_tanh","query_pre_attn_scalar":24,
		"sliding_window":4,"layer_types":["sliding_attention","full_attention","sliding_attention"],
		"rope_parameters":{"full_attention":{"rope_type":"linear","factor":8.0,"rope_theta":1000000.0},
		"sliding_attention":{"rope_type":"default","rope_theta":10000.0}},
		"attn_logit_softcapping":null,"final_logit_softcapping":null,"tie_word_embeddings":true,"torch_dtype":"bfloat16"}`},
	{"gemma3 legacy rope keys sliding_window_pattern attention bias f32", safetensors.F32, `{"architectures":["Gemma3ForCausalLM"],"model_type":"gemma3_text",
		"hidden_size":48,"intermediate_size":80,"num_hidden_layers":2,"num_attention_heads":2,"num_key_value_heads":1,"head_dim":24,
		"vocab_size":100,"rms_norm_eps":1e-6,"query_pre_attn_scalar":24,"attention_bias":true,
		"sliding_window":3,"sliding_window_pattern":2,"rope_theta":1000000.0,"rope_local_base_freq":500.0,"rope_scaling":null,
		"tie_word_embeddings":false}`},
	// Gemma 2 with caps small enough to bend most scores and logits of
	// these weights (the released 50 and 30 barely touch them).
	{"gemma2 soft-capped alternating windows qpas bf16", safetensors.BF16, `{"architectures":["Gemma2ForCausalLM"],"model_type":"gemma2",
		"hidden_size":64,"intermediate_size":96,"num_hidden_layers":3,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":32,
		"vocab_size":100,"rms_norm_eps":1e-6,"hidden_activation":"gelu_pytorch_tanh","query_pre_attn_scalar":24,
		"sliding_window":4,"attn_logit_softcapping":1.5,"final_logit_softcapping":2.0,"rope_theta":10000.0,"torch_dtype":"bfloat16"}`},
	{"gemma2 soft-capped gqa 3 layer_types attention bias f32", safetensors.F32, `{"architectures":["Gemma2ForCausalLM"],"model_type":"gemma2",
		"hidden_size":48,"intermediate_size":80,"num_hidden_layers":2,"num_attention_heads":6,"num_key_value_heads":2,"head_dim":16,
		"vocab_size":100,"rms_norm_eps":1e-6,"query_pre_attn_scalar":16,"attention_bias":true,"sliding_window":3,
		"layer_types":["full_attention","sliding_attention"],"attn_logit_softcapping":0.8,"final_logit_softcapping":null,
		"rope_parameters":{"rope_type":"default","rope_theta":500.0},"tie_word_embeddings":false}`},
	{"mixtral 8 experts top-2 gqa bf16", safetensors.BF16, `{"architectures":["MixtralForCausalLM"],"model_type":"mixtral",
		"hidden_size":64,"intermediate_size":48,"num_hidden_layers":2,"num_attention_heads":6,"num_key_value_heads":2,"head_dim":32,
		"vocab_size":100,"rms_norm_eps":1e-5,"rope_theta":1000000.0,"sliding_window":null,"tie_word_embeddings":false,
		"num_local_experts":8,"num_experts_per_tok":2}`},
	{"qwen2_moe shared expert dense layer 1 top-3 unnormalised f16", safetensors.F16, `{"architectures":["Qwen2MoeForCausalLM"],"model_type":"qwen2_moe",
		"hidden_size":64,"intermediate_size":80,"num_hidden_layers":3,"num_attention_heads":4,"num_key_value_heads":2,
		"vocab_size":100,"rms_norm_eps":1e-6,"rope_theta":1000000.0,"tie_word_embeddings":true,"use_sliding_window":false,
		"sliding_window":0,"num_experts":6,"num_experts_per_tok":3,"norm_topk_prob":false,"moe_intermediate_size":24,
		"shared_expert_intermediate_size":40,"decoder_sparse_step":1,"mlp_only_layers":[1]}`},
	{"qwen3_moe qk norm 16 experts top-4 f32", safetensors.F32, `{"architectures":["Qwen3MoeForCausalLM"],"model_type":"qwen3_moe",
		"hidden_size":64,"intermediate_size":96,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":32,
		"vocab_size":100,"rms_norm_eps":1e-6,"rope_theta":1000000,"attention_bias":false,"tie_word_embeddings":false,
		"num_local_experts":16,"num_experts_per_tok":4,"norm_topk_prob":true,"moe_intermediate_size":32,"mlp_only_layers":[]}`},
}

// logitTol is the tolerance of the synthetic tests: float32 computation
// against float64, relative to the largest |logit| of the row. Rounding
// differences give ~1e-6 here; a wrong op gives 1e-2 or more.
const logitTol = 1e-4

// checkRow compares a row of logits with the reference and returns the
// largest error relative to the row's largest |logit|.
func checkRow(t *testing.T, what string, got []float32, want []float64) float64 {
	t.Helper()
	var scale, worst float64
	for _, w := range want {
		scale = max(scale, math.Abs(w))
	}
	for i := range want {
		d := math.Abs(float64(got[i]) - want[i])
		if !(d <= logitTol*scale) {
			t.Fatalf("%s: logit %d = %.7g, want %.7g (|diff| %.2g > %.0e·%.3g)", what, i, got[i], want[i], d, logitTol, scale)
		}
		worst = max(worst, d/scale)
	}
	return worst
}

// TestSyntheticFamilies loads a small random checkpoint of each family and
// checks prefill (all positions) and token-by-token decode against the
// float64 reference forward pass.
func TestSyntheticFamilies(t *testing.T) {
	tokens := []int32{1, 17, 42, 99, 0, 5, 5, 63, 28, 71, 3}
	for i, fam := range synthFamilies {
		t.Run(fam.name, func(t *testing.T) {
			dir := t.TempDir()
			w := writeSynthetic(t, dir, fam.config, fam.dtype, uint64(10+i), nil)
			be := cpu.New(2)
			m, err := Load(dir, be, LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			want := refForward(m.Config(), w, tokens)
			// The same tokens as a prefill of 4 and single decode steps
			// (differs from one pass only with longrope, by design).
			steps := []int{4}
			for range len(tokens) - 4 {
				steps = append(steps, 1)
			}
			wantSteps := refForwardChunks(m.Config(), w, tokens, steps)

			cache := NewDenseCache(be, m.Config())
			var b Batch
			b.Add(7, 0, tokens...)
			b.AllLogits = true
			out, err := m.Forward(&b, cache)
			if err != nil {
				t.Fatal(err)
			}
			var worst float64
			for p := range tokens {
				worst = max(worst, checkRow(t, "prefill position "+itoa(p), out.Row(p), want[p]))
			}

			// Prefill 4 tokens, then decode the rest one by one.
			cache = NewDenseCache(be, m.Config())
			b = Batch{}
			b.Add(7, 0, tokens[:4]...)
			out, err = m.Forward(&b, cache)
			if err != nil {
				t.Fatal(err)
			}
			checkRow(t, "prefill last", out.Row(0), wantSteps[3])
			for p := 4; p < len(tokens); p++ {
				b = Batch{}
				b.Add(7, p, tokens[p])
				out, err = m.Forward(&b, cache)
				if err != nil {
					t.Fatal(err)
				}
				worst = max(worst, checkRow(t, "decode position "+itoa(p), out.Row(0), wantSteps[p]))
			}
			t.Logf("worst logit error / max |logit|: %.2e", worst)
		})
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestLoadErrors checks that a checkpoint disagreeing with its config is
// rejected with an error naming the tensor.
func TestLoadErrors(t *testing.T) {
	base := synthFamilies[0].config // llama, tied
	for _, tc := range []struct {
		name   string
		config string
		extra  map[string][]int
		edit   func(dir string)
		want   string
	}{
		{"unused tensor", base, map[string][]int{"model.layers.0.self_attn.q_norm.weight": {16}}, nil, "model.layers.0.self_attn.q_norm.weight"},
		{"missing lm_head", strings.Replace(base, `"tie_word_embeddings":true`, `"tie_word_embeddings":false`, 1), nil, nil, ""},
		{"wrong shape", strings.Replace(base, `"intermediate_size":96`, `"intermediate_size":97`, 1), nil, nil, ""},
		{"stored rotary buffer is ignored", base, map[string][]int{"model.layers.0.self_attn.rotary_emb.inv_freq": {8}}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeSynthetic(t, dir, base, safetensors.BF16, 1, tc.extra)
			if tc.config != base {
				// Overwrite config.json with the disagreeing one.
				if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(tc.config), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			m, err := Load(dir, cpu.New(1), LoadOptions{})
			switch {
			case tc.name == "stored rotary buffer is ignored":
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				m.Close()
			case tc.name == "missing lm_head":
				if err == nil || !strings.Contains(err.Error(), `"lm_head.weight"`) {
					t.Fatalf("Load = %v, want an error naming lm_head.weight", err)
				}
			case tc.name == "wrong shape":
				if err == nil || !strings.Contains(err.Error(), "gate_proj.weight") || !strings.Contains(err.Error(), "[96 64]") {
					t.Fatalf("Load = %v, want a shape error naming gate_proj", err)
				}
			default:
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("Load = %v, want an error containing %q", err, tc.want)
				}
			}
		})
	}

	if _, err := Load(t.TempDir(), cpu.New(1), LoadOptions{}); err == nil || !strings.Contains(err.Error(), "config.json") {
		t.Errorf("Load of an empty dir: %v", err)
	}

	// A weight stored in a dtype with no float conversion.
	dir := t.TempDir()
	writeSynthetic(t, dir, base, safetensors.BF16, 1, nil)
	path := filepath.Join(dir, "model.safetensors")
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var tensors []safetensors.Tensor
	for _, info := range f.Tensors() {
		tt, err := f.Tensor(info.Name)
		if err != nil {
			t.Fatal(err)
		}
		tt.Data = slices.Clone(tt.Data)
		if info.Name == "model.norm.weight" {
			tt.DType = safetensors.I32
			tt.Data = make([]byte, 4*info.NumElements())
		}
		tensors = append(tensors, tt)
	}
	f.Close()
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, tensors, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir, cpu.New(1), LoadOptions{}); err == nil || !strings.Contains(err.Error(), `"model.norm.weight"`) || !strings.Contains(err.Error(), "I32") {
		t.Errorf("Load with an I32 weight: %v", err)
	}
}

// TestLoadProgress checks the progress bar output.
func TestLoadProgress(t *testing.T) {
	dir := t.TempDir()
	writeSynthetic(t, dir, synthFamilies[0].config, safetensors.BF16, 1, nil)
	var buf bytes.Buffer
	m, err := Load(dir, cpu.New(1), LoadOptions{Progress: &buf})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	out := buf.String()
	if !strings.Contains(out, "\rloading [") || !strings.Contains(out, "100%") || !strings.HasSuffix(out, "\n") {
		t.Errorf("progress output %q", out)
	}
}

// fullCache is an Attention whose Begin always reports that the cache is
// full, as a paged low-bit cache would when out of memory.
type fullCache struct{ attends int }

func (c *fullCache) Begin(*Batch) error { return errors.New("kv: out of memory for 3 tokens") }
func (c *fullCache) Attend(int, *Batch, backend.Tensor, backend.Tensor, backend.Tensor, backend.Tensor) error {
	c.attends++
	return nil
}

// TestForwardErrors checks that bad batches and failing caches give errors,
// not panics, and leave the backend usable.
func TestForwardErrors(t *testing.T) {
	dir := t.TempDir()
	writeSynthetic(t, dir, synthFamilies[0].config, safetensors.BF16, 1, nil)
	be := cpu.New(2)
	m, err := Load(dir, be, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var b Batch
	b.Add(0, 0, 1, 2, 3)
	fc := &fullCache{}
	if _, err := m.Forward(&b, fc); err == nil || !strings.Contains(err.Error(), "out of memory") || fc.attends != 0 {
		t.Errorf("Forward with a full cache: %v, %d Attend calls", err, fc.attends)
	}
	if _, err := m.Forward(&b, nil); err == nil {
		t.Error("Forward with a nil Attention succeeded")
	}
	bad := Batch{}
	bad.Add(0, 0, 1, 100) // vocab is 100
	if _, err := m.Forward(&bad, NewDenseCache(be, m.Config())); err == nil || !strings.Contains(err.Error(), "outside the vocabulary") {
		t.Errorf("Forward with token 100: %v", err)
	}
	cache := NewDenseCache(be, m.Config())
	skip := Batch{}
	skip.Add(0, 2, 1) // the cache holds nothing for sequence 0
	if _, err := m.Forward(&skip, cache); err == nil || !strings.Contains(err.Error(), "layer 0") {
		t.Errorf("Forward at a position the cache does not hold: %v", err)
	}
	if _, err := m.Forward(&b, cache); err != nil {
		t.Errorf("Forward after errors: %v", err)
	}
}
