package model

import (
	"fmt"
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
// bit; DEC on the q/o shape only must count only o's residuals (q takes
// its k and v's k_chunk 0: decByLayer) and report k_chunk per layer.
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
	if wu, ws := WeightMemoryOf(uniform), WeightMemoryOf(byShape); wu.DECBytes != ws.DECBytes || ws.DECPerLayer["q_proj"] != 16 || ws.DECPerLayer["down_proj"] != 16 {
		t.Errorf("weight memory: uniform %+v, per shape %+v", wu, ws)
	}
	q := shapes[0].Shape // q/o
	part := WeightMemoryOf(load(LoadOptions{DECByShape: map[Shape]DECChoice{q: {KChunk: 8}}}))
	// Rᵀ of an o matrix: K rows of N int4 outputs plus params. q, whose k
	// and v have no DEC, takes theirs (decByLayer): one residual a layer.
	want := int64(cfg.Layers) * wq.Bytes(wq.Int4, wq.ResidualGroup, q.K, q.N)
	if part.DECBytes != want || part.DECPerLayer["o_proj"] != 8 || part.DECPerLayer["q_proj"] != 0 || part.DECPerLayer["k_proj"] != 0 || len(part.DECPerLayer) != 7 {
		t.Errorf("DEC on %v only: %+v, want %d residual bytes (o's)", q, part, want)
	}
	if _, err := Load(dir, be, LoadOptions{DECByShape: map[Shape]DECChoice{q: {KChunk: 8}}}); err == nil {
		t.Error("DEC per shape with fp16 weights was accepted")
	}
}

// TestDECByLayerJoinsQKV: per-shape choices where q's shape (shared with o)
// and k/v's differ: a layer's q, k and v all take the smallest k_chunk
// (n_tb 0 where it was another shape's), o and the MLP keep their shapes'.
func TestDECByLayerJoinsQKV(t *testing.T) {
	var specs []weightSpec
	lin := func(name string, N, K int) {
		specs = append(specs, weightSpec{name: name, shape: []int{N, K}, linear: true})
	}
	for l := range 2 {
		p := fmt.Sprintf("model.layers.%d.", l)
		lin(p+"self_attn.q_proj.weight", 512, 512)
		lin(p+"self_attn.k_proj.weight", 128, 512)
		lin(p+"self_attn.v_proj.weight", 128, 512)
		lin(p+"self_attn.o_proj.weight", 512, 512)
		lin(p+"mlp.gate_proj.weight", 1024, 512)
		lin(p+"mlp.up_proj.weight", 1024, 512)
		lin(p+"mlp.down_proj.weight", 512, 1024)
		specs = append(specs, weightSpec{name: p + "input_layernorm.weight", shape: []int{512}})
	}
	for _, tc := range []struct {
		qo, kv DECChoice
		q, k   DECChoice // what q and k (and v) get
	}{
		{qo: DECChoice{8, 3}, kv: DECChoice{0, 0}, q: DECChoice{0, 0}, k: DECChoice{0, 0}},
		{qo: DECChoice{8, 3}, kv: DECChoice{4, 2}, q: DECChoice{4, 0}, k: DECChoice{4, 2}},
		{qo: DECChoice{4, 3}, kv: DECChoice{16, 2}, q: DECChoice{4, 3}, k: DECChoice{4, 0}},
		{qo: DECChoice{8, 3}, kv: DECChoice{8, 2}, q: DECChoice{8, 3}, k: DECChoice{8, 2}},
	} {
		by := map[Shape]DECChoice{{512, 512}: tc.qo, {128, 512}: tc.kv, {1024, 512}: {16, 1}, {512, 1024}: {2, 4}}
		got := decByLayer(specs, func(N, K int) DECChoice { return by[Shape{N, K}] })
		if len(got) != 14 {
			t.Fatalf("%+v: %d choices, want the 14 linear weights'", tc, len(got))
		}
		for l := range 2 {
			p := fmt.Sprintf("model.layers.%d.", l)
			for name, want := range map[string]DECChoice{
				"self_attn.q_proj.weight": tc.q, "self_attn.k_proj.weight": tc.k, "self_attn.v_proj.weight": tc.k,
				"self_attn.o_proj.weight": tc.qo, "mlp.gate_proj.weight": {16, 1}, "mlp.up_proj.weight": {16, 1},
				"mlp.down_proj.weight": {2, 4},
			} {
				if got[p+name] != want {
					t.Errorf("q/o %+v, k/v %+v: %s %+v, want %+v", tc.qo, tc.kv, p+name, got[p+name], want)
				}
			}
		}
	}
}

// TestParseDECAlloc checks the by-projection form: '+' and ',' between
// entries, the canonical String, and an error naming each bad entry.
func TestParseDECAlloc(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"down_proj:32,v_proj:256,o_proj:64", "v_proj:256+o_proj:64+down_proj:32"},
		{" down_proj:16 + v_proj:256+o_proj:32+gate_proj:32+up_proj:32", "v_proj:256+o_proj:32+gate_proj:32+up_proj:32+down_proj:16"},
		{"q_proj:0", "q_proj:0"},
	} {
		a, err := ParseDECAlloc(tc.in)
		if err != nil {
			t.Fatalf("%q: %v", tc.in, err)
		}
		if a.String() != tc.want {
			t.Errorf("%q: String %q, want %q", tc.in, a.String(), tc.want)
		}
		if b, err := ParseDECAlloc(a.String()); err != nil || !reflect.DeepEqual(a, b) {
			t.Errorf("%q: round trip %v, %v", tc.in, b, err)
		}
	}
	if a, _ := ParseDECAlloc("q_proj:0"); a.On() {
		t.Error("q_proj:0 is on")
	}
	if a, _ := ParseDECAlloc("q_proj:0+v_proj:8"); !a.On() {
		t.Error("v_proj:8 is off")
	}
	for _, tc := range []struct{ in, msg string }{
		{"", "names no projection"},
		{"foo_proj:8", "unknown projection \"foo_proj\""},
		{"v:8", "unknown projection"},
		{"v_proj", "want name:k_chunk"},
		{"v_proj:-1", "non-negative"},
		{"v_proj:x", "non-negative"},
		{"v_proj:8+v_proj:16", "v_proj given twice"},
	} {
		if _, err := ParseDECAlloc(tc.in); err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%q: error %v, want one with %q", tc.in, err, tc.msg)
		}
	}
	for s, want := range map[string]bool{"v_proj:8": true, " down_proj:": true, "tuned:5%": false, "32": false, "v_proj": false} {
		if IsDECAllocEntry(s) != want {
			t.Errorf("IsDECAllocEntry(%q) = %v", s, !want)
		}
	}
}

// TestLoadDECByLayer loads the reference model with DEC by projection on the
// CPU: every projection named at one k_chunk gives the bits of that k_chunk
// everywhere; v and down alone give residuals for those two only (q, k and
// v no longer agree: decByKind), other logits than DEC off, and a
// negative k_chunk is refused.
func TestLoadDECByLayer(t *testing.T) {
	dir := testmodel.Dir(t)
	spec, _ := wq.ParseSpec("int4")
	be := cpu.New(2)
	cache := map[string]*wq.Matrix{}
	cfg, err := LoadConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
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
	every := DECAlloc{}
	for _, p := range DECProjections {
		every[p] = 16
	}
	a, c := logits(load(LoadOptions{DECKChunk: 16})), logits(load(LoadOptions{DECByLayer: every}))
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(c[i]) {
			t.Fatalf("logit %d: k_chunk 16 %v, every projection at 16 %v", i, a[i], c[i])
		}
	}
	vd := load(LoadOptions{DECByLayer: DECAlloc{"v_proj": 16, "down_proj": 8}})
	wm := WeightMemoryOf(vd)
	var vShape, dShape Shape
	shapes, err := LinearShapes(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range shapes {
		for _, l := range s.Layers {
			switch l {
			case "v_proj":
				vShape = s.Shape
			case "down_proj":
				dShape = s.Shape
			}
		}
	}
	want := int64(cfg.Layers) * (wq.Bytes(wq.Int4, wq.ResidualGroup, vShape.K, vShape.N) + wq.Bytes(wq.Int4, wq.ResidualGroup, dShape.K, dShape.N))
	if wm.DECBytes != want || wm.DECPerLayer["v_proj"] != 16 || wm.DECPerLayer["down_proj"] != 8 || wm.DECPerLayer["q_proj"] != 0 ||
		wm.DECPerLayer["k_proj"] != 0 || len(wm.DECPerLayer) != 7 {
		t.Errorf("v 16 and down 8: %+v, want %d residual bytes (v's and down's)", wm, want)
	}
	off, on := logits(load(LoadOptions{})), logits(vd)
	same := true
	for i := range off {
		same = same && off[i] == on[i]
	}
	if same {
		t.Error("DEC on v and down left every logit as without DEC")
	}
	if _, err := Load(dir, be, LoadOptions{Weights: spec, Quantized: cache, DECByLayer: DECAlloc{"v_proj": -1}}); err == nil || !strings.Contains(err.Error(), "non-negative") {
		t.Errorf("a negative k_chunk: %v", err)
	}
	if _, err := Load(dir, be, LoadOptions{DECByLayer: DECAlloc{"v_proj": 8}}); err == nil {
		t.Error("DEC by projection with fp16 weights was accepted")
	}
}
