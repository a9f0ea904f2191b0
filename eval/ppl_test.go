package eval

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/bitdecode/bitdecode/backend/cpu"
	"github.com/bitdecode/bitdecode/internal/testmodel"
	"github.com/bitdecode/bitdecode/internal/tinymodel"
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
	res, err := PPL(context.Background(), be, m, ids, specs, PPLOptions{Ctx: 256, Windows: 1, First: 1, Chunk: 16,
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
	if _, err := PPL(context.Background(), be, m, ids, specs[:1], PPLOptions{Ctx: 256, First: len(ids), Chunk: 16}); err == nil {
		t.Error("a first window past the text: no error")
	}
}

// TestEvalPPL scores one window of held-out Go code: the fp16 baseline's
// chunked and token-by-token modes agree, and KL divergence grows as the
// cache gets coarser (int8 < int4 < int2), as the reference table's
// perplexities do.
func TestEvalPPL(t *testing.T) {
	dir := testmodel.Dir(t)
	text, err := os.ReadFile(filepath.Join(dir, "heldout.txt"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	ids := tok.Encode(string(text[:20000]), false)
	be := cpu.New(0)
	m, err := model.Load(dir, be, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	specs := []kv.Spec{kv.MustParseSpec("fp16:res32"), kv.MustParseSpec("int8:kc32:res32"), kv.MustParseSpec("int4:kc32:v32:res32"), kv.MustParseSpec("int2:kc32:v32:res32")}
	chunked, err := PPL(context.Background(), be, m, ids, specs, PPLOptions{Ctx: 384, Windows: 1, Chunk: 96})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range chunked {
		t.Logf("ctx 384, chunk 96: %-24s ppl %.4f  kld %.5f  top1 %.3f", r.Spec, r.PPL, r.KLD, r.Top1)
	}
	if chunked[0].KLD != 0 || chunked[0].Top1 != 1 {
		t.Errorf("baseline against itself: kld %g top1 %g", chunked[0].KLD, chunked[0].Top1)
	}
	if !(chunked[1].KLD < chunked[2].KLD && chunked[2].KLD < chunked[3].KLD) {
		t.Errorf("KL divergence not increasing int8 < int4 < int2: %+v", chunked)
	}
	if chunked[1].KLD > 1e-3 {
		t.Errorf("int8 KLD %g, want < 1e-3 (the reference's int8 PPL cost is 0.01%%)", chunked[1].KLD)
	}
	// fp16 storage is exact whether blocks pack early or late: the chunked
	// and the token-by-token runs score the same stored values and differ
	// only by float32 summation order.
	step, err := PPL(context.Background(), be, m, ids, specs[:1], PPLOptions{Ctx: 384, Windows: 1, Chunk: 1})
	if err != nil {
		t.Fatal(err)
	}
	if d := math.Abs(step[0].PPL-chunked[0].PPL) / chunked[0].PPL; d > 1e-4 {
		t.Errorf("fp16 ppl token by token %.6f vs chunked %.6f (rel %.2g)", step[0].PPL, chunked[0].PPL, d)
	}
}

// TestPPLPackAll checks the honest mode on the tiny model: every scored
// token reads a packed context (the share is 1; without it a window's last
// positions read the fp16 residual and the share is below 1), the fed
// length grows to whole blocks without scoring more tokens, and the rows
// name the resolved formats.
func TestPPLPackAll(t *testing.T) {
	m, _, be := tinymodel.Load(t)
	r := rand.New(rand.NewPCG(1, 2))
	tokens := make([]int, 3*300)
	for i := range tokens {
		tokens[i] = r.IntN(tinymodel.Vocab)
	}
	specs := []kv.Spec{kv.MustParseSpec("fp16"), kv.MustParseSpec("int2:kc32:v32:res64"), kv.MustParseSpec("int4:kc32:v128:res32")}
	honest, err := PPL(context.Background(), be, m, tokens, specs, PPLOptions{Ctx: 300, Windows: 2, Chunk: 40, PackAll: true})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := PPL(context.Background(), be, m, tokens, specs, PPLOptions{Ctx: 300, Windows: 2, Chunk: 40})
	if err != nil {
		t.Fatal(err)
	}
	for i := range specs {
		h, p := honest[i], plain[i]
		if h.Tokens != 2*299 || p.Tokens != h.Tokens {
			t.Errorf("%s: %d and %d tokens scored, want %d", h.Spec, h.Tokens, p.Tokens, 2*299)
		}
		if h.PackedShare != 1 || p.PackedShare >= 1 {
			t.Errorf("%s: packed share %g with PackAll, %g without; want 1 and below 1", h.Spec, h.PackedShare, p.PackedShare)
		}
		t.Logf("%s (%s): PPL %.4f packed vs %.4f decoding (packed share %.3f)", h.Spec, h.Resolved, h.PPL, p.PPL, p.PackedShare)
	}
	if honest[2].Resolved != "int4:kc32:v64:res32" {
		t.Errorf("resolved spec %q, want the value group clipped to D=64", honest[2].Resolved)
	}
	if honest[1].PPL == plain[1].PPL {
		t.Error("int2 scores the same with every token packed as with the residual read in fp16")
	}
}
