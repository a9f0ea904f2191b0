package model

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/bitdecode/bitdecode/backend/cpu"
	"github.com/bitdecode/bitdecode/internal/testmodel"
	"github.com/bitdecode/bitdecode/wq"
)

// TestLinearShapes checks the distinct linear-layer shapes of Llama-3.1-8B.
func TestLinearShapes(t *testing.T) {
	cfg, err := ParseConfig([]byte(`{"architectures": ["LlamaForCausalLM"], "model_type": "llama",
		"hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
		"num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
		"vocab_size": 128256, "max_position_embeddings": 131072, "rms_norm_eps": 1e-5, "rope_theta": 500000.0}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := LinearShapes(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := []LinearShape{
		{Shape{4096, 4096}, []string{"q_proj", "o_proj"}, 64},
		{Shape{1024, 4096}, []string{"k_proj", "v_proj"}, 64},
		{Shape{14336, 4096}, []string{"gate_proj", "up_proj"}, 64},
		{Shape{4096, 14336}, []string{"down_proj"}, 32},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("LinearShapes = %+v\nwant %+v", got, want)
	}
	if got[3].String() != "4096x14336" {
		t.Errorf("Shape.String = %q", got[3].String())
	}
}

// TestDECSettingsRoundTrip saves two DEC tunings into a settings file that
// already holds bw terms and an unknown key, reads them back, and checks
// the choices per target and the errors for a missing target and a bad file.
func TestDECSettingsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, SettingsFile)
	if err := os.WriteFile(path, []byte(`{"bw": {"adj8": 112, "adj4": 3072}, "future": {"x": 1}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tun := &DECTuning{Device: "GPU", Mode: "serial", Residual: "int4", Tokens: 1, Targets: []float64{2.5, 5},
		Shapes: []DECShapeTuning{
			{N: 4096, K: 4096, BaseUS: 12, Picks: []DECPick{{SlowdownPct: 2.5, KChunk: 8, Blocks: 16}, {SlowdownPct: 5, KChunk: 32, Blocks: 8}}},
			{N: 1024, K: 4096, BaseUS: 5, Picks: []DECPick{{SlowdownPct: 2.5, KChunk: 0}, {SlowdownPct: 5, KChunk: 8, Blocks: 4}}},
		}}
	if err := SaveDECTuning(path, "int4", tun); err != nil {
		t.Fatal(err)
	}
	if err := SaveDECTuning(path, "int3", tun); err != nil {
		t.Fatal(err)
	}
	s, err := LoadSettings(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s.BW.Adj8 != 112 || s.BW.Adj4 != 3072 || len(s.DEC) != 2 || !reflect.DeepEqual(s.DEC["int4"], tun) {
		t.Fatalf("read back %+v, dec %+v", s.BW, s.DEC["int4"])
	}
	if data, _ := os.ReadFile(path); !strings.Contains(string(data), `"future"`) {
		t.Error("the unknown key was dropped")
	}
	c, err := s.DEC["int4"].Choices(5)
	if err != nil {
		t.Fatal(err)
	}
	if want := (map[Shape]DECChoice{{4096, 4096}: {32, 8}, {1024, 4096}: {8, 4}}); !reflect.DeepEqual(c, want) {
		t.Errorf("choices at 5%% = %v, want %v", c, want)
	}
	if _, err := s.DEC["int4"].Choices(10); err == nil || !strings.Contains(err.Error(), "2.5%, 5%") {
		t.Errorf("a 10%% target: err = %v, want the tuned targets listed", err)
	}
	if err := os.WriteFile(path, []byte(`{"dec": {"int4": {"shapes": [{"n": 4096, "k": 4096, "picks": [{"slowdown_pct": 5, "k_chunk": -1}]}]}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSettings(dir); err == nil || !strings.Contains(err.Error(), "dec.int4") {
		t.Errorf("negative k_chunk: err = %v, want one naming dec.int4", err)
	}
	if DECSettingsKey(wq.Spec{Elem: wq.Int3, Group: 64, Method: wq.GPTQ}) != "int3:g64" {
		t.Errorf("DECSettingsKey(int3:g64:gptq) = %q", DECSettingsKey(wq.Spec{Elem: wq.Int3, Group: 64, Method: wq.GPTQ}))
	}
}

// TestLoadDECByShape loads the reference model with DEC chosen per shape:
// every shape at k_chunk 16 must give the logits of DECKChunk 16 bit for
// bit; DEC on the q/o shape only must count only those residuals and
// report k_chunk per shape.
func TestLoadDECByShape(t *testing.T) {
	dir := testmodel.Dir(t)
	spec, _ := wq.ParseSpec("int4")
	be := cpu.New(2)
	cache := map[string]*wq.Matrix{}
	cfg, err := LoadConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	shapes, err := LinearShapes(cfg)
	if err != nil {
		t.Fatal(err)
	}
	all := map[Shape]DECChoice{}
	for _, s := range shapes {
		all[s.Shape] = DECChoice{KChunk: 16, Blocks: 3}
	}
	load := func(o LoadOptions) Model {
		o.Weights, o.Quantized = spec, cache
		m, err := Load(dir, be, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	uniform, byShape := load(LoadOptions{DECKChunk: 16}), load(LoadOptions{DECByShape: all})
	ids := []int32{5, 100, 2000, 7, 42}
	logits := func(m Model) []float32 {
		var b Batch
		b.Add(0, 0, ids...)
		b.AllLogits = true
		lg, err := m.Forward(&b, noAttention{})
		if err != nil {
			t.Fatal(err)
		}
		return lg.Data
	}
	a, c := logits(uniform), logits(byShape)
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(c[i]) {
			t.Fatalf("logit %d: uniform %v, per shape %v", i, a[i], c[i])
		}
	}
	if wu, ws := WeightMemoryOf(uniform), WeightMemoryOf(byShape); wu.DECBytes != ws.DECBytes || ws.DECPerShape["512x512"] != 16 {
		t.Errorf("weight memory: uniform %+v, per shape %+v", wu, ws)
	}
	q := shapes[0].Shape // q/o
	part := WeightMemoryOf(load(LoadOptions{DECByShape: map[Shape]DECChoice{q: {KChunk: 8}}}))
	// Rᵀ of a q/o matrix: K rows of N int4 outputs plus params.
	want := int64(shapes[0].Count) * wq.Bytes(wq.Int4, wq.ResidualGroup, q.K, q.N)
	if part.DECBytes != want || part.DECPerShape[q.String()] != 8 || part.DECPerShape[shapes[1].String()] != 0 || len(part.DECPerShape) != len(shapes) {
		t.Errorf("DEC on %v only: %+v, want %d residual bytes", q, part, want)
	}
	if _, err := Load(dir, be, LoadOptions{DECByShape: map[Shape]DECChoice{q: {KChunk: 8}}}); err == nil {
		t.Error("DEC per shape with fp16 weights was accepted")
	}
}
