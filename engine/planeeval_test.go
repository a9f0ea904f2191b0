package engine

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/bitdecode/bitdecode/backend/cpu"
	"github.com/bitdecode/bitdecode/internal/testmodel"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/model"
	"github.com/bitdecode/bitdecode/tokenizer"
)

// TestEvalPPLPlanes scores the reference checkpoint with bw caches: all
// High reads the same fp16 values as the fp16 cache (PPL equal to float32
// rounding, KLD ~0); uniform 8-bit reads (every token, the newest too)
// read exactly half of fp16's bytes and cost some accuracy; the probe
// counter sees the probes it was given.
func TestEvalPPLPlanes(t *testing.T) {
	dir := testmodel.Dir(t)
	be := cpu.New(0)
	m, err := model.Load(dir, be, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(filepath.Join(dir, "heldout.txt"))
	if err != nil {
		t.Fatal(err)
	}
	ids := tok.Encode(string(text[:20000]), false)
	specs := []kv.Spec{kv.MustParseSpec("fp16"), kv.MustParseSpec("bw:r16"), kv.MustParseSpec("bw:m100:w0:s0:a8=0x70")}
	probes := []int{10, 100, 200}
	res, err := EvalPPL(context.Background(), be, m, ids, specs, PPLOptions{Ctx: 256, Windows: 1, First: 1, Chunk: 16,
		Probes: func(w int, _ []int) []int {
			if w != 1 {
				t.Errorf("probes asked for window %d, want 1", w)
			}
			return probes
		}})
	if err != nil {
		t.Fatal(err)
	}
	fp, hi, med := res[0], res[1], res[2]
	if math.Abs(hi.PPL/fp.PPL-1) > 1e-4 || hi.KLD > 1e-6 || hi.Traffic != 1 {
		t.Errorf("bw all-high: PPL %g vs fp16 %g, KLD %g, traffic %g; want equal PPL, KLD ~0, traffic 1", hi.PPL, fp.PPL, hi.KLD, hi.Traffic)
	}
	if med.Traffic != 0.5 || med.KLD <= 0 || med.KLD > 0.1 {
		t.Errorf("bw uniform 8-bit: traffic %g, KLD %g; want 0.5 and a small positive KLD", med.Traffic, med.KLD)
	}
	if fp.Probes != len(probes) || fp.Read != nil || hi.Read == nil {
		t.Errorf("probes %d (want %d), fp16 read stats %v (want none), bw %v", fp.Probes, len(probes), fp.Read, hi.Read)
	}
	if _, err := EvalPPL(context.Background(), be, m, ids, specs[:1], PPLOptions{Ctx: 256, First: len(ids), Chunk: 16}); err == nil {
		t.Error("a first window past the text: no error")
	}
}
