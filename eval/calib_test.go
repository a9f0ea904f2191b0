package eval

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/bitdecode/bitdecode/backend/cpu"
	"github.com/bitdecode/bitdecode/internal/testmodel"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/model"
	"github.com/bitdecode/bitdecode/wq"
)

// TestCalibrateAndEvalWeights calibrates on a few tokens of the reference
// checkpoint (every linear input gets a Hessian over exactly those tokens;
// q, k, v and gate, up share theirs), loads GPTQ int4 weights from it and
// scores fp16 against int4 RTN and GPTQ weights with PPLVariants.
func TestCalibrateAndEvalWeights(t *testing.T) {
	dir := testmodel.Dir(t)
	be := cpu.New(0)
	calib := make([]int, 96)
	for i := range calib {
		calib[i] = (i*37 + 11) % 8000
	}
	cal, err := Calibrate(context.Background(), be, dir, calib, CalibOptions{Ctx: 64, Chunk: 32})
	if err != nil {
		t.Fatal(err)
	}
	hs := cal.Hessians
	for _, k := range RecallKChunks {
		t.Logf("approximate top-k recall on the model's linear inputs, k_chunk %d: %.3f", k, cal.Recall[k])
		if !(cal.Recall[k] > 0 && cal.Recall[k] <= 1) {
			t.Errorf("recall at k_chunk %d: %v", k, cal.Recall[k])
		}
	}
	layer := func(l int, proj string) *wq.Hessian {
		return hs[fmt.Sprintf("model.layers.%d.%s.weight", l, proj)]
	}
	for l := range 6 {
		q, k, v := layer(l, "self_attn.q_proj"), layer(l, "self_attn.k_proj"), layer(l, "self_attn.v_proj")
		g, u := layer(l, "mlp.gate_proj"), layer(l, "mlp.up_proj")
		o, d := layer(l, "self_attn.o_proj"), layer(l, "mlp.down_proj")
		if q == nil || q != k || q != v || g == nil || g != u || o == nil || d == nil || q == g {
			t.Fatalf("layer %d: Hessians q %p k %p v %p gate %p up %p o %p down %p", l, q, k, v, g, u, o, d)
		}
		for _, h := range []*wq.Hessian{q, g, o, d} {
			if h.Tokens != len(calib) || h.H[0] <= 0 || math.IsNaN(h.H[len(h.H)-1]) {
				t.Fatalf("layer %d: Hessian over %d tokens (want %d), H[0] %g", l, h.Tokens, len(calib), h.H[0])
			}
		}
	}
	load := func(spec string) model.Model {
		ws, err := wq.ParseSpec(spec)
		if err != nil {
			t.Fatal(err)
		}
		m, err := model.Load(dir, be, model.LoadOptions{Weights: ws, Calib: hs})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	fp16, _ := kv.ParseSpec("fp16")
	vs := []PPLVariant{{"fp16", load("fp16"), fp16}, {"int4", load("int4"), fp16}, {"int4:gptq", load("int4:gptq"), fp16}}
	tokens := make([]int, 130)
	for i := range tokens {
		tokens[i] = (i*101 + 7) % 8000
	}
	res, err := PPLVariants(context.Background(), be, vs, tokens, PPLOptions{Ctx: 64, Chunk: 32})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		t.Logf("%s: PPL %.3f, KLD %.5f, weights %d bytes", r.Name, r.PPL, r.KLD, r.Weight.Bytes)
		if r.Name != vs[i].Name || r.Tokens != 126 || !(r.PPL > 1) || (i > 0 && !(r.KLD > 0)) {
			t.Errorf("result %d: %+v", i, r)
		}
	}
	if !(res[1].Weight.Bytes < res[0].Weight.Bytes/2) {
		t.Errorf("int4 weights take %d bytes, fp16 %d", res[1].Weight.Bytes, res[0].Weight.Bytes)
	}
}

// padder is a CPU backend that asks for heads of 256, as the CUDA backend
// asks for a head dim its kernels lack (backend.HeadDimPadder).
type padder struct{ *cpu.Backend }

func (padder) PadHeadDim(d int) (int, bool) { return max(d, 256), d <= 256 }

// TestCalibratePaddedHeads: on a backend that pads heads (128 to 256 here),
// Calibrate runs the padded model, so o_proj's Hessian spans the padded
// width and GPTQ loads on that backend; the padded channels, never
// activated, have a zero diagonal (GPTQ treats them as dead).
func TestCalibratePaddedHeads(t *testing.T) {
	dir := testmodel.Dir(t)
	be := padder{cpu.New(0)}
	calib := make([]int, 64)
	for i := range calib {
		calib[i] = (i*37 + 11) % 8000
	}
	cal, err := Calibrate(context.Background(), be, dir, calib, CalibOptions{Ctx: 64, Chunk: 32})
	if err != nil {
		t.Fatal(err)
	}
	ws, err := wq.ParseSpec("int4:gptq")
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(dir, be, model.LoadOptions{Weights: ws, Calib: cal.Hessians})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	cfg := m.Config()
	o := cal.Hessians["model.layers.0.self_attn.o_proj.weight"]
	if cfg.HeadDim != 256 || cfg.StoredHeadDim == 0 || o == nil || o.K != cfg.Heads*256 {
		k := -1
		if o != nil {
			k = o.K
		}
		t.Fatalf("head dim %d (stored %d); o_proj's Hessian of %d channels", cfg.HeadDim, cfg.StoredHeadDim, k)
	}
	D := cfg.StoredHeadDim
	if h := o.H[D*o.K+D]; h != 0 { // head 0's first padded channel
		t.Errorf("o_proj's Hessian at padded channel %d: %g, want 0", D, h)
	}
	if h := o.H[0]; !(h > 0) {
		t.Errorf("o_proj's Hessian at channel 0: %g, want > 0", h)
	}
}
