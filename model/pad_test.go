package model

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/backend/cpu"
	"github.com/bitdecode/bitdecode/model/safetensors"
	"github.com/bitdecode/bitdecode/wq"
)

// padFamilies are random tiny checkpoints of head dims the GPU kernels lack
// (Phi-3-mini's 96, Phi-2's 80), with every feature the padding touches:
// fused q|k|v, partial rotary embeddings, longrope past its original
// context (its attention factor folded into q), q/k/v biases, Qwen3's and
// Gemma 3's per-head q/k norms (Gemma 3's query_pre_attn_scalar folded
// into q_norm), OLMo 2's whole-projection q/k norms, Granite's attention
// multiplier.
var padFamilies = []struct {
	name   string
	dtype  safetensors.DType
	config string
}{
	{"phi3-mini-like d96 fused longrope bf16", safetensors.BF16, `{"architectures":["Phi3ForCausalLM"],"model_type":"phi3",
		"hidden_size":192,"intermediate_size":96,"num_hidden_layers":2,"num_attention_heads":2,"num_key_value_heads":2,
		"vocab_size":100,"rms_norm_eps":1e-5,"rope_theta":10000.0,"hidden_act":"silu","sliding_window":5,
		"max_position_embeddings":64,"original_max_position_embeddings":6,"tie_word_embeddings":false,
		"rope_scaling":{"type":"longrope","short_factor":[1.00,1.05,1.10,1.15,1.20,1.25,1.30,1.35,1.40,1.45,1.50,1.55,1.60,1.65,1.70,1.75,1.80,1.85,1.90,1.95,2.00,2.05,2.10,2.15,2.20,2.25,2.30,2.35,2.40,2.45,2.50,2.55,2.60,2.65,2.70,2.75,2.80,2.85,2.90,2.95,3.00,3.05,3.10,3.15,3.20,3.25,3.30,3.35],
		"long_factor":[1.0,1.5,2.0,2.5,3.0,3.5,4.0,4.5,5.0,5.5,6.0,6.5,7.0,7.5,8.0,8.5,9.0,9.5,10.0,10.5,11.0,11.5,12.0,12.5,13.0,13.5,14.0,14.5,15.0,15.5,16.0,16.5,17.0,17.5,18.0,18.5,19.0,19.5,20.0,20.5,21.0,21.5,22.0,22.5,23.0,23.5,24.0,24.5]}}`},
	{"phi3 d80 partial rotary 0.5 gqa f32", safetensors.F32, `{"architectures":["Phi3ForCausalLM"],"model_type":"phi3",
		"hidden_size":160,"intermediate_size":96,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":80,
		"vocab_size":100,"rms_norm_eps":1e-5,"rope_theta":10000.0,"hidden_act":"silu","sliding_window":null,
		"partial_rotary_factor":0.5,"max_position_embeddings":4096,"original_max_position_embeddings":4096,"tie_word_embeddings":true}`},
	{"qwen3 d80 qk norm biases bf16", safetensors.BF16, `{"architectures":["Qwen3ForCausalLM"],"model_type":"qwen3",
		"hidden_size":64,"intermediate_size":96,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":80,
		"vocab_size":100,"rms_norm_eps":1e-6,"rope_theta":1000000,"attention_bias":true,"tie_word_embeddings":true,
		"sliding_window":null,"use_sliding_window":false}`},
	{"qwen2 d96 qkv bias f16", safetensors.F16, `{"architectures":["Qwen2ForCausalLM"],"model_type":"qwen2",
		"hidden_size":192,"intermediate_size":96,"num_hidden_layers":2,"num_attention_heads":2,"num_key_value_heads":1,
		"vocab_size":100,"rms_norm_eps":1e-6,"rope_theta":1000000.0,"tie_word_embeddings":false,
		"use_sliding_window":false,"sliding_window":32768,"max_window_layers":2}`},
	{"olmo2 d96 full qk norm bf16", safetensors.BF16, `{"architectures":["Olmo2ForCausalLM"],"model_type":"olmo2",
		"hidden_size":192,"intermediate_size":96,"num_hidden_layers":2,"num_attention_heads":2,"num_key_value_heads":1,
		"vocab_size":100,"rms_norm_eps":1e-6,"rope_theta":500000.0,"hidden_act":"silu","attention_bias":false,"tie_word_embeddings":false}`},
	{"gemma3 d80 qk norms qpas local/global bf16", safetensors.BF16, `{"architectures":["Gemma3ForCausalLM"],"model_type":"gemma3_text",
		"hidden_size":64,"intermediate_size":96,"num_hidden_layers":2,"num_attention_heads":2,"num_key_value_heads":1,"head_dim":80,
		"vocab_size":100,"rms_norm_eps":1e-6,"hidden_activation":"gelu_pytorch_tanh","query_pre_attn_scalar":60,
		"sliding_window":4,"layer_types":["sliding_attention","full_attention"],
		"rope_parameters":{"full_attention":{"rope_type":"linear","factor":8.0,"rope_theta":1000000.0},
		"sliding_attention":{"rope_type":"default","rope_theta":10000.0}},
		"tie_word_embeddings":true,"torch_dtype":"bfloat16"}`},
	{"granite d96 attention multiplier bf16", safetensors.BF16, `{"architectures":["GraniteForCausalLM"],"model_type":"granite",
		"hidden_size":192,"intermediate_size":96,"num_hidden_layers":2,"num_attention_heads":2,"num_key_value_heads":2,
		"vocab_size":100,"rms_norm_eps":1e-5,"rope_theta":10000.0,"hidden_act":"silu","tie_word_embeddings":true,
		"embedding_multiplier":12.0,"attention_multiplier":0.05,"residual_multiplier":0.22,"logits_scaling":8.0}`},
}

// TestPaddedHeads loads checkpoints of head dims 96 and 80 twice on the CPU
// backend, as stored and with every head padded (LoadOptions.HeadDim: 128,
// the size the GPU pads both to, and D + 16), and checks both against the
// float64 reference of the unpadded model (refForward) with logitTol, the
// float32 computation's bound of TestSyntheticFamilies: the padded model
// adds zeros to dot products and norms (exact), rescales the attention
// scale and the q/k norm weights by √(D/Dp) factors in float32 (an ulp
// each, 6e-8 relative) and sums Dp − D more zeros in the attention: its
// rounding is that of the unpadded model, orders of magnitude inside the
// bound; a misplaced row, a wrong scale or eps moves the logits by 1e-2 or
// more. The two models must also agree with each other within twice the
// bound, and the padded config must say what it padded.
func TestPaddedHeads(t *testing.T) {
	tokens := []int32{1, 17, 42, 99, 0, 5, 5, 63, 28, 71, 3}
	for i, fam := range padFamilies {
		cfg, err := ParseConfig([]byte(fam.config))
		if err != nil {
			t.Fatalf("%s: %v", fam.name, err)
		}
		D := cfg.HeadDim
		for _, dp := range []int{128, D + 16} {
			t.Run(fmt.Sprintf("%s/pad %d to %d", fam.name, D, dp), func(t *testing.T) {
				dir := t.TempDir()
				w := writeSynthetic(t, dir, fam.config, fam.dtype, uint64(40+i), nil)
				be := cpu.New(2)
				plain, err := Load(dir, be, LoadOptions{})
				if err != nil {
					t.Fatal(err)
				}
				defer plain.Close()
				padded, err := Load(dir, be, LoadOptions{HeadDim: dp})
				if err != nil {
					t.Fatal(err)
				}
				defer padded.Close()
				pc := padded.Config()
				if pc.HeadDim != dp || pc.StoredHeadDim != D || pc.CheckpointHeadDim() != D || plain.Config().HeadDim != D || plain.Config().StoredHeadDim != 0 {
					t.Fatalf("padded config: head dim %d stored %d; plain: %d stored %d", pc.HeadDim, pc.StoredHeadDim, plain.Config().HeadDim, plain.Config().StoredHeadDim)
				}
				want := refForward(cfg, w, tokens)
				rows := func(m Model) [][]float32 {
					var b Batch
					b.Add(3, 0, tokens...)
					b.AllLogits = true
					out, err := m.Forward(&b, NewDenseCache(be, m.Config()))
					if err != nil {
						t.Fatal(err)
					}
					var r [][]float32
					for p := range tokens {
						r = append(r, append([]float32(nil), out.Row(p)...))
					}
					return r
				}
				got, base := rows(padded), rows(plain)
				var worst, apart float64
				for p := range tokens {
					worst = max(worst, checkRow(t, fmt.Sprintf("padded, position %d", p), got[p], want[p]))
					checkRow(t, fmt.Sprintf("unpadded, position %d", p), base[p], want[p])
					var scale float64
					for _, v := range want[p] {
						scale = max(scale, math.Abs(v))
					}
					for j := range got[p] {
						d := math.Abs(float64(got[p][j]) - float64(base[p][j]))
						if !(d <= 2*logitTol*scale) {
							t.Fatalf("position %d logit %d: padded %.7g, unpadded %.7g", p, j, got[p][j], base[p][j])
						}
						apart = max(apart, d/scale)
					}
				}
				t.Logf("worst padded logit error / max |logit| %.2e against float64; padded − unpadded %.2e", worst, apart)
			})
		}
	}
}

// TestPadHeadsConfig checks PadHeads' config and its refusals, and that a
// backend's HeadDimPadder decides the padding of Load and NewRandom.
func TestPadHeadsConfig(t *testing.T) {
	cfg, err := ParseConfig([]byte(padFamilies[0].config))
	if err != nil {
		t.Fatal(err)
	}
	p, err := cfg.PadHeads(128)
	if err != nil {
		t.Fatal(err)
	}
	if p.HeadDim != 128 || p.StoredHeadDim != 96 || p.RotaryDims() != 96 || cfg.HeadDim != 96 {
		t.Errorf("padded: D %d stored %d R %d (original D %d)", p.HeadDim, p.StoredHeadDim, p.RotaryDims(), cfg.HeadDim)
	}
	if got, want := p.AttnScale, 1/math.Sqrt(96); got != want {
		t.Errorf("AttnScale %v, want 1/√96 = %v", got, want)
	}
	if got, want := p.QKEps(), cfg.RMSNormEps*96/128; math.Abs(got-want) > 1e-20 {
		t.Errorf("QKEps %v, want %v", got, want)
	}
	inv := p.InvFreq()
	if len(inv) != 64 {
		t.Fatalf("%d inverse frequencies, want 64", len(inv))
	}
	orig := cfg.InvFreq()
	for i, f := range inv {
		if i < 48 && f != orig[i] || i >= 48 && f != 0 {
			t.Errorf("inv_freq[%d] = %v (unpadded %v)", i, f, orig[min(i, 47)])
		}
	}
	if same, err := cfg.PadHeads(96); err != nil || same != cfg {
		t.Errorf("PadHeads(D) = %p, %v; want the config itself", same, err)
	}
	for _, dp := range []int{64, 97} {
		if _, err := cfg.PadHeads(dp); err == nil || !strings.Contains(err.Error(), "cannot pad head dim 96") {
			t.Errorf("PadHeads(%d): %v", dp, err)
		}
	}
	if _, err := p.PadHeads(256); err == nil || !strings.Contains(err.Error(), "already padded") {
		t.Errorf("padding twice: %v", err)
	}

	// A backend that asks for 128 gets the padded model from Load and
	// NewRandom; one without HeadDimPadder (the CPU) the checkpoint's.
	dir := t.TempDir()
	writeSynthetic(t, dir, padFamilies[0].config, padFamilies[0].dtype, 1, nil)
	pb := padder{cpu.New(1)}
	for _, tc := range []struct {
		be   backend.Backend
		want int
	}{{pb, 128}, {cpu.New(1), 96}} {
		m, err := Load(dir, tc.be, LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if m.Config().HeadDim != tc.want {
			t.Errorf("Load on %T: head dim %d, want %d", tc.be, m.Config().HeadDim, tc.want)
		}
		m.Close()
		r, err := NewRandom(cfg, tc.be, 1)
		if err != nil {
			t.Fatal(err)
		}
		if r.Config().HeadDim != tc.want {
			t.Errorf("NewRandom on %T: head dim %d, want %d", tc.be, r.Config().HeadDim, tc.want)
		}
		r.Close()
	}
}

// padder is a CPU backend that asks for heads of 128 (as the CUDA backend
// does for 96).
type padder struct{ *cpu.Backend }

func (padder) PadHeadDim(d int) (int, bool) { return max(d, 128), d <= 128 }

// TestPaddedHeadsQuantized loads padFamilies with int8 weights (groups of
// 32) padded to 128: the loader pads q, k, v and o before quantizing, so
// that zero rows and groups of zero columns are quantized too (scale 0, no
// NaN) and the real groups keep their own error; the logits stay within
// int8's bound of TestPartialRotaryQuantized (0.05 of max |logit|) of the
// float64 reference on the stored weights, unpadded and padded alike.
func TestPaddedHeadsQuantized(t *testing.T) {
	spec, err := wq.ParseSpec("int8:g32")
	if err != nil {
		t.Fatal(err)
	}
	tokens := []int32{1, 17, 42, 99, 0, 5, 5, 63, 28, 71, 3}
	for i, fam := range padFamilies {
		t.Run(fam.name, func(t *testing.T) {
			dir := t.TempDir()
			w := writeSynthetic(t, dir, fam.config, fam.dtype, uint64(40+i), nil)
			cfg, err := ParseConfig([]byte(fam.config))
			if err != nil {
				t.Fatal(err)
			}
			want := refForward(cfg, w, tokens)
			be := cpu.New(2)
			for _, dp := range []int{0, 128} {
				m, err := Load(dir, be, LoadOptions{Weights: spec, HeadDim: dp})
				if err != nil {
					t.Fatal(err)
				}
				var b Batch
				b.Add(0, 0, tokens...)
				b.AllLogits = true
				out, err := m.Forward(&b, NewDenseCache(be, m.Config()))
				if err != nil {
					t.Fatal(err)
				}
				moved := scaledMaxDiff(out, want)
				hd := m.Config().HeadDim
				m.Close()
				if !(moved > 0 && moved <= 0.05) {
					t.Errorf("head dim %d: int8 weights: logits differ from the reference by %.3g of max |logit|, want in (0, 0.05]", hd, moved)
				}
				t.Logf("head dim %d, int8 weights vs float64 reference: %.2e of max |logit|", hd, moved)
			}
		})
	}
}
