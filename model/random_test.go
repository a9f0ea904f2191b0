package model

import (
	"fmt"
	"math"
	"testing"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/backend/cpu"
)

// TestNewRandom builds a small random Llama on the CPU twice with one seed
// and once with another: the same seed gives the same logits bit for bit,
// another seed different ones, and the logits are finite and of a sane size
// (norm weights are ones, matrices std RandomStd).
func TestNewRandom(t *testing.T) {
	cfg, err := ParseConfig([]byte(`{"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
		"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100,
		"max_position_embeddings": 64, "rms_norm_eps": 1e-5}`))
	if err != nil {
		t.Fatal(err)
	}
	be := cpu.New(1)
	logits := func(seed uint64) []float32 {
		m, err := NewRandom(cfg, be, seed)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		var b Batch
		b.Add(0, 0, 1, 2, 3)
		out, err := m.Forward(&b, NewDenseCache(be, cfg))
		if err != nil {
			t.Fatal(err)
		}
		return out.Data
	}
	a, b, c := logits(1), logits(1), logits(2)
	same, maxAbs := true, 0.0
	for i := range a {
		if math.IsNaN(float64(a[i])) || math.IsInf(float64(a[i]), 0) {
			t.Fatalf("logit %d = %g", i, a[i])
		}
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			t.Fatalf("logit %d: %g then %g with the same seed", i, a[i], b[i])
		}
		if a[i] != c[i] {
			same = false
		}
		maxAbs = math.Max(maxAbs, math.Abs(float64(a[i])))
	}
	if same {
		t.Fatal("seeds 1 and 2 gave the same logits")
	}
	// Final RMSNorm makes |h| ~ sqrt(H); logits ~ N(0, H·0.02²) ≈ 0.16 std.
	if maxAbs > 2 || maxAbs < 0.01 {
		t.Fatalf("largest |logit| %g, want about 0.16·4", maxAbs)
	}
}

// joinRecorder is a CPU backend that records the JoinWeights calls (the
// CUDA backend's backend.WeightJoiner) by weight names.
type joinRecorder struct {
	backend.Backend
	calls [][]string
}

func (j *joinRecorder) JoinWeights(ws ...backend.Weight) error {
	var names []string
	for _, w := range ws {
		names = append(names, w.Name())
	}
	j.calls = append(j.calls, names)
	return nil
}

// TestLlamaJoinsGroups: a backend.WeightJoiner is asked, once per layer
// after loading, to join q|k|v and gate|up in Forward's LinearGroup order.
func TestLlamaJoinsGroups(t *testing.T) {
	cfg, err := ParseConfig([]byte(`{"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
		"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100,
		"max_position_embeddings": 64, "rms_norm_eps": 1e-5}`))
	if err != nil {
		t.Fatal(err)
	}
	be := &joinRecorder{Backend: cpu.New(1)}
	m, err := NewRandom(cfg, be, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var want [][]string
	for i := range cfg.Layers {
		p := fmt.Sprintf("model.layers.%d.", i)
		want = append(want, []string{p + "self_attn.q_proj.weight", p + "self_attn.k_proj.weight", p + "self_attn.v_proj.weight"},
			[]string{p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"})
	}
	if fmt.Sprint(be.calls) != fmt.Sprint(want) {
		t.Fatalf("JoinWeights calls %v, want %v", be.calls, want)
	}
}
