package gpukv

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/bitdecode/bitdecode/attn"
	"github.com/bitdecode/bitdecode/backend/gpu"
	"github.com/bitdecode/bitdecode/engine"
	"github.com/bitdecode/bitdecode/eval"
	"github.com/bitdecode/bitdecode/internal/kvtest"
	"github.com/bitdecode/bitdecode/internal/testmodel"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/kvcache"
	"github.com/bitdecode/bitdecode/model"
	"github.com/bitdecode/bitdecode/tokenizer"
)

// TestGPUPlaneCacheMatchesReference drives a GPUPlaneCache through
// gpuScenario (prefill chunks across blocks, a sequence joining later,
// mixed batches of decode steps) over 2 layers and checks every output
// against attn.ReferencePlanes over CPU plane caches fed the same tokens
// with the GPU cache's own tier maps (so a re-tier that float rounding of
// the masses decides differently cannot fail the test), within the
// tensor-core kernel's bound. Mixed specs re-tier every 4 tokens.
func TestGPUPlaneCacheMatchesReference(t *testing.T) {
	be := gpuBackend(t)
	specs := []string{"bw", "bw:m100:w0:s0", "bw:l100:w0:s0:blk32", "bw:h30:m40:l30:w8:s2:r4", "bw:h30:m30:l20:e20:w8:s2:r4",
		"bw:bf16:h40:m60:w8:s2:r4", "bw:nofilter:h20:m40:l40:w8:s2:r4:blk128"}
	shapes := []attn.Shape{{Hq: 12, Hkv: 4, D: 128}, {Hq: 8, Hkv: 1, D: 64}, {Hq: 6, Hkv: 2, D: 256}}
	for i, spec := range specs {
		sh := shapes[i%len(shapes)]
		t.Run(fmt.Sprintf("%s/Hq%d-Hkv%d-D%d", spec, sh.Hq, sh.Hkv, sh.D), func(t *testing.T) {
			runGPUPlaneScenario(t, be, spec, sh, rand.New(rand.NewPCG(uint64(i), 9)))
		})
	}
}

func runGPUPlaneScenario(t *testing.T, be *gpu.Backend, spec string, sh attn.Shape, r *rand.Rand) {
	runGPUPlaneSteps(t, be, spec, sh, r, 1024, 0, gpuScenario)
}

// runGPUPlaneSteps is runGPUPlaneScenario over a cache of maxLen tokens a
// sequence whose prefill chunks hold up to maxChunk tokens (0: two
// residual blocks), through the steps scenario returns for the format's
// residual. It returns the length bounds of the cache's decode plans.
func runGPUPlaneSteps(t *testing.T, be *gpu.Backend, spec string, sh attn.Shape, r *rand.Rand, maxLen, maxChunk int, scenario func(nr int) []gpuStep) []int {
	const layers = 2
	cfg := &model.Config{Architecture: "test", Layers: layers, Heads: sh.Hq, KVHeads: sh.Hkv, HeadDim: sh.D, MaxPositions: 4096}
	sp := kv.MustParseSpec(spec)
	f, err := sp.Resolve(sh.D)
	if err != nil {
		t.Fatal(err)
	}
	if maxChunk == 0 {
		maxChunk = 2 * f.Residual
	}
	c, err := kvcache.New(be, cfg, sp, kvcache.Options{MaxSeqs: 4, MaxLen: maxLen, MaxChunk: maxChunk})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	gc, ok := c.(*Planes)
	if !ok {
		t.Fatalf("kvcache.New(%s) on CUDA returned %T, want *Planes", spec, c)
	}
	refs := map[int][]*attn.PlaneCache{} // per sequence, per layer
	qw, kvw := sh.Hq*sh.D, sh.Hkv*sh.D
	partial := false // some token read at MEDIUM or LOW
	for si, step := range scenario(f.Residual) {
		var b model.Batch
		for i, id := range step.ids {
			b.Add(id, gc.Len(id), make([]int32, step.lens[i])...)
		}
		if err := gc.Begin(&b); err != nil {
			t.Fatalf("step %d: %v", si, err)
		}
		for l := range layers {
			q, k, v, got := attendRandom(t, be, gc, l, &b, sh, r)
			for _, s := range b.Seqs {
				if refs[s.ID] == nil {
					for range layers {
						rc, err := attn.NewPlaneCache(f, sh)
						if err != nil {
							t.Fatal(err)
						}
						refs[s.ID] = append(refs[s.ID], rc)
					}
				}
				ref := refs[s.ID][l]
				if err := ref.Append(k[s.Start*kvw:(s.Start+s.Len)*kvw], v[s.Start*kvw:(s.Start+s.Len)*kvw]); err != nil {
					t.Fatal(err)
				}
				for h := range ref.Tiers {
					tiers := gc.Tiers(s.ID, l, h)
					if len(tiers) != ref.Len {
						t.Fatalf("step %d layer %d seq %d: %d tiers for %d tokens", si, l, s.ID, len(tiers), ref.Len)
					}
					ref.Tiers[h] = append(ref.Tiers[h][:0], tiers...)
					for _, x := range tiers {
						partial = partial || x == kv.Medium || x == kv.Low
					}
				}
				want := make([]float32, s.Len*qw)
				st, err := attn.ReferencePlanes(want, q[s.Start*qw:(s.Start+s.Len)*qw], []*attn.PlaneSeq{&ref.PlaneSeq}, attn.Params{Format: f, Shape: sh, Tq: s.Len})
				if err != nil {
					t.Fatal(err)
				}
				what := fmt.Sprintf("step %d layer %d seq %d (pos %d, %d tokens)", si, l, s.ID, s.Pos, s.Len)
				for row := range s.Len * sh.Hq {
					tol := kvtest.PlaneDecodeTol(f.K.Elem == kv.BF16, st, sh.D, row, true)
					for ch := range sh.D {
						g, w := float64(got[s.Start*qw+row*sh.D+ch]), float64(want[row*sh.D+ch])
						if g != g || math.Abs(g-w) > tol+math.Abs(w)/1024 {
							t.Fatalf("%s: row %d channel %d: got %g, want %g (tol %.3g)", what, row, ch, g, w, tol+math.Abs(w)/1024)
						}
					}
				}
			}
		}
	}
	if p := sp.Planes; (p.Medium > 0 || p.Low > 0) && !partial {
		t.Errorf("%s: no token was ever read at 8 or 4 bits: the policy never re-tiered", spec)
	}
	if rs := gc.ReadStats(); rs.FP16Bytes == 0 || (sp.Planes.High < 100 && rs.Traffic() >= 1) {
		t.Errorf("%s: read stats %+v", spec, rs)
	}
	for id := range refs {
		gc.Remove(id)
	}
	if gc.FreeBlocks() != gc.opts.Blocks || gc.FreeSlots() != 4 {
		t.Fatalf("after removing every sequence: %d blocks and %d slots free, want %d and 4", gc.FreeBlocks(), gc.FreeSlots(), gc.opts.Blocks)
	}
	if err := gc.CheckIdle(); err != nil {
		t.Fatal(err)
	}
	var bounds []int
	for b := range gc.decode {
		bounds = append(bounds, b)
	}
	slices.Sort(bounds)
	return bounds
}

// TestGPUPlaneCacheLiveBounds: a bit-plane cache of 8K tokens a sequence
// whose sequences hold up to ~1K: decode steps are planned and launched
// for their length bound (liveBound: 512, then 1024, then 2048 as a
// sequence crosses each), not for MaxLen, and every output stays within
// the reference's bound across the crossings (all-16-bit and a re-tiering
// mix).
func TestGPUPlaneCacheLiveBounds(t *testing.T) {
	be := gpuBackend(t)
	scenario := func(nr int) []gpuStep {
		steps := []gpuStep{{ids: []int{1}, lens: []int{500}}, {ids: []int{2}, lens: []int{30}}}
		for range 16 { // sequence 1: 501 -> 516 tokens, across 512
			steps = append(steps, gpuStep{ids: []int{2, 1}, lens: []int{1, 1}})
		}
		steps = append(steps, gpuStep{ids: []int{1}, lens: []int{500}})
		for range 10 { // 1017 -> 1026, across 1024
			steps = append(steps, gpuStep{ids: []int{1, 2}, lens: []int{1, 1}})
		}
		return steps
	}
	for i, c := range []struct {
		spec string
		sh   attn.Shape
	}{{"bw", attn.Shape{Hq: 12, Hkv: 4, D: 128}}, {"bw:h30:m40:l30:w8:s2:r4", attn.Shape{Hq: 8, Hkv: 1, D: 64}}} {
		t.Run(c.spec, func(t *testing.T) {
			bounds := runGPUPlaneSteps(t, be, c.spec, c.sh, rand.New(rand.NewPCG(uint64(i), 13)), 8192, 512, scenario)
			if !slices.Equal(bounds, []int{512, 1024, 2048}) {
				t.Errorf("decode plans' length bounds %v, want 512, 1024 and 2048", bounds)
			}
		})
	}
}

// TestGPUPlaneCacheGolden generates golden.json's greedy tokens with an
// all-HIGH bit-plane cache on the GPU (it reads the same fp16 values as the
// fp16 cache: every greedy token must follow), and scores the reference
// checkpoint with bw caches on the GPU: all-HIGH PPL equals the fp16 GPU
// cache's within the kernels' rounding, uniform 8-bit reads read half the
// bytes for a small KLD, and an H/M/L mix re-tiers (traffic below fp16's).
func TestGPUPlaneCacheGolden(t *testing.T) {
	dir := testmodel.Dir(t)
	be := gpuBackend(t)
	data, err := os.ReadFile(filepath.Join(dir, "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Prompts []struct {
			IDs    []int `json:"ids"`
			Greedy []int `json:"greedy_ids"`
		} `json:"prompts"`
	}
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(dir, be, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for pi, p := range g.Prompts {
		c, err := NewPlanes(be, m.Config(), kv.MustParseSpec("bw"), kvcache.Options{MaxSeqs: 1, MaxLen: len(p.IDs) + len(p.Greedy) + 1, MaxChunk: 64})
		if err != nil {
			t.Fatal(err)
		}
		st, err := engine.Generate(context.Background(), m, tok, c, 0, p.IDs, engine.GenerateOptions{MaxTokens: len(p.Greedy), StopIDs: []int{}, ChunkTokens: 64}, func(string) {})
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for n < len(p.Greedy) && n < len(st.Tokens) && st.Tokens[n] == p.Greedy[n] {
			n++
		}
		if n != len(p.Greedy) {
			t.Errorf("all-HIGH bw GPU cache, prompt %d: greedy tokens follow golden.json for %d of %d", pi, n, len(p.Greedy))
		}
	}
	text, err := os.ReadFile(filepath.Join(dir, "heldout.txt"))
	if err != nil {
		t.Fatal(err)
	}
	ids := tok.Encode(string(text[:20000]), false)
	specs := []kv.Spec{kv.MustParseSpec("fp16"), kv.MustParseSpec("bw:r16"), kv.MustParseSpec("bw:m100:w0:s0:a8=0x70"),
		kv.MustParseSpec("bw:h20:m40:l40:r16")}
	newCache := func(m model.Model, sp kv.Spec) (kvcache.Cache, error) {
		return kvcache.New(be, m.Config(), sp, kvcache.Options{MaxSeqs: 1, MaxLen: 256, MaxChunk: 16})
	}
	res, err := eval.PPL(context.Background(), be, m, ids, specs, eval.PPLOptions{Ctx: 256, Windows: 1, First: 1, Chunk: 16, NewCache: newCache})
	if err != nil {
		t.Fatal(err)
	}
	fp, hi, med, mix := res[0], res[1], res[2], res[3]
	t.Logf("GPU PPL: fp16 %.4f, bw all-high %.4f, bw 8-bit %.4f (KLD %.4f), bw h20:m40:l40 %.4f (KLD %.4f, traffic %.3f)",
		fp.PPL, hi.PPL, med.PPL, med.KLD, mix.PPL, mix.KLD, mix.Traffic)
	if math.Abs(hi.PPL/fp.PPL-1) > 1e-3 || hi.KLD > 1e-4 || hi.Traffic != 1 {
		t.Errorf("bw all-high: PPL %g vs fp16 %g, KLD %g, traffic %g; want equal PPL, KLD ~0, traffic 1", hi.PPL, fp.PPL, hi.KLD, hi.Traffic)
	}
	if med.Traffic != 0.5 || med.KLD <= 0 || med.KLD > 0.1 {
		t.Errorf("bw uniform 8-bit: traffic %g, KLD %g; want 0.5 and a small positive KLD", med.Traffic, med.KLD)
	}
	if mix.Traffic >= 0.9 || mix.PPL != mix.PPL {
		t.Errorf("bw h20:m40:l40: traffic %g, PPL %g; want re-tiered reads below fp16's", mix.Traffic, mix.PPL)
	}
}
