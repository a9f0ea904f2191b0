package gpukv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bitdecode/bitdecode/attn"
	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/backend/gpu"
	"github.com/bitdecode/bitdecode/engine"
	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/internal/half"
	"github.com/bitdecode/bitdecode/internal/kvtest"
	"github.com/bitdecode/bitdecode/internal/testmodel"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/kvcache"
	"github.com/bitdecode/bitdecode/model"
	"github.com/bitdecode/bitdecode/tokenizer"
)

var (
	gpuOnce sync.Once
	gpuBE   *gpu.Backend
	gpuErr  error
)

// gpuBackend opens the CUDA backend once, or skips the test without a GPU.
func gpuBackend(t *testing.T) *gpu.Backend {
	t.Helper()
	gpuOnce.Do(func() { gpuBE, gpuErr = gpu.New(0) })
	if gpuErr != nil {
		if errors.Is(gpuErr, cuda.ErrNoDriver) || errors.Is(gpuErr, cuda.ErrNoDevice) {
			t.Skipf("no CUDA device: %v", gpuErr)
		}
		t.Fatal(gpuErr)
	}
	_ = gpuBE.Sync()
	return gpuBE
}

// gpuStep is one batch of a GPU cache scenario: sequence ids and how many
// new tokens each brings.
type gpuStep struct {
	ids  []int
	lens []int
}

// gpuScenario exercises prefill chunks that cross block boundaries (short,
// exactly one block, several blocks), a sequence that joins later, and mixed
// batches of decode steps and a prefill chunk, over 2 layers.
func gpuScenario(nr int) []gpuStep {
	steps := []gpuStep{
		{ids: []int{1}, lens: []int{nr + 7}},
		{ids: []int{2, 1}, lens: []int{nr, 1}},
		{ids: []int{3}, lens: []int{5}},
		{ids: []int{1, 2, 3}, lens: []int{nr - 9, 3, 2 * nr}},
	}
	for i := range 12 {
		steps = append(steps, gpuStep{ids: []int{3, 1, 2}, lens: []int{1, 1, 1 + i%2}})
	}
	return steps
}

// TestGPUCacheMatchesReference drives a GPUCache through gpuScenario with
// random keys (outlier channels), values and queries, and checks every
// output against attn.Reference over CPU caches fed the same tokens (the
// GPU packs bit for bit as the CPU does, so both attend over the same
// values), with the tensor-core kernel's bound.
func TestGPUCacheMatchesReference(t *testing.T) {
	be := gpuBackend(t)
	specs := []string{"fp16", "bf16", "int8", "int4", "int4:kt128", "int2", "k4v2", "int4:kc32:v32:res64", "int4:rot", "int2:kc32:v32:rot", "k4v2:kt64:rot"}
	shapes := []attn.Shape{{Hq: 12, Hkv: 4, D: 128}, {Hq: 8, Hkv: 1, D: 64}, {Hq: 6, Hkv: 2, D: 256}}
	for i, spec := range specs {
		sh := shapes[i%len(shapes)]
		t.Run(fmt.Sprintf("%s/Hq%d-Hkv%d-D%d", spec, sh.Hq, sh.Hkv, sh.D), func(t *testing.T) {
			runGPUScenario(t, be, spec, sh, rand.New(rand.NewPCG(uint64(i), 7)))
		})
	}
}

func runGPUScenario(t *testing.T, be *gpu.Backend, spec string, sh attn.Shape, r *rand.Rand) {
	runGPUSteps(t, be, spec, sh, r, 1024, 0, gpuScenario)
}

// runGPUSteps is runGPUScenario over a cache of maxLen tokens a sequence
// whose prefill chunks hold up to maxChunk tokens (0: two residual
// blocks), through the steps scenario returns for the format's residual.
// It returns the cache's decode plans' keys.
func runGPUSteps(t *testing.T, be *gpu.Backend, spec string, sh attn.Shape, r *rand.Rand, maxLen, maxChunk int, scenario func(nr int) []gpuStep) []decodeKey {
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
	gc, err := NewPaged(be, cfg, sp, kvcache.Options{MaxSeqs: 4, MaxLen: maxLen, MaxChunk: maxChunk})
	if err != nil {
		t.Fatal(err)
	}
	defer gc.Close()
	refs := map[int][]*attn.Cache{} // per sequence, per layer
	qw, kvw := sh.Hq*sh.D, sh.Hkv*sh.D
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
						c, err := attn.NewCache(f, sh)
						if err != nil {
							t.Fatal(err)
						}
						refs[s.ID] = append(refs[s.ID], c)
					}
				}
				ref := refs[s.ID][l]
				if err := ref.Append(k[s.Start*kvw:(s.Start+s.Len)*kvw], v[s.Start*kvw:(s.Start+s.Len)*kvw]); err != nil {
					t.Fatal(err)
				}
				want := make([]float32, s.Len*qw)
				st, err := attn.Reference(want, q[s.Start*qw:(s.Start+s.Len)*qw], []*attn.Seq{&ref.Seq}, attn.Params{Format: f, Shape: sh, Tq: s.Len})
				if err != nil {
					t.Fatal(err)
				}
				g := got[s.Start*qw : (s.Start+s.Len)*qw]
				if f.Rotate {
					// Compare where the kernel computed: rotate both back
					// (kv.Rotate is its own inverse). The GPU's output was
					// rotated once more in float32 after its fp16 rounding;
					// that rotation and this one each add at most
					// log2(D)·sqrt(D)·eps32·MaxAbsV per element.
					g, want = rotateRows(g, sh.D), rotateRows(want, sh.D)
				}
				checkGPUExtra(t, fmt.Sprintf("step %d layer %d seq %d (pos %d, %d tokens)", si, l, s.ID, s.Pos, s.Len), f, sh, st, g, want, rotationTol(f, sh.D, st))
			}
		}
	}
	blocks, slots := gc.FreeBlocks(), gc.FreeSlots()
	for id := range refs {
		gc.Remove(id)
	}
	b2, s2 := gc.FreeBlocks(), gc.FreeSlots()
	if s2 != 4 || b2 != gc.opts.Blocks || b2 <= blocks || s2 <= slots {
		t.Fatalf("after removing every sequence: %d blocks and %d slots free, want %d and 4", b2, s2, gc.opts.Blocks)
	}
	var keys []decodeKey
	for _, lk := range gc.uniqueKernels() {
		for k := range lk.decode {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	return keys
}

// TestGPUCacheLongChunks drives caches through prefill chunks long enough
// for prefill.cu at every format (kernels.PrefillRoute: 5120 query rows in
// all where K and V are both at most 4 bits), so the low-bit layers
// take its dequantizing route (kernels.PrefillPlan.LaunchDequant over the
// cache's scratch copy), beside decode steps of another sequence and after
// cached blocks, checking every output against attn.Reference.
func TestGPUCacheLongChunks(t *testing.T) {
	be := gpuBackend(t)
	scenario := func(nr int) []gpuStep {
		return []gpuStep{
			{ids: []int{1}, lens: []int{512}},
			{ids: []int{1}, lens: []int{300}},                    // 1200 rows after 4 packed blocks
			{ids: []int{2, 1}, lens: []int{min(2*nr+9, 480), 1}}, // a new sequence's chunk beside a decode step
			{ids: []int{1, 2}, lens: []int{1, 1}},
			{ids: []int{2}, lens: []int{400}},
			{ids: []int{2, 1}, lens: []int{1, 1}},
		}
	}
	for i, spec := range []string{"int4:rot", "int2", "k4v2:kt64", "int8", "int4:kc64:v64:res64"} {
		sh := attn.Shape{Hq: 32, Hkv: 8, D: 128}
		if i%2 == 1 {
			sh = attn.Shape{Hq: 16, Hkv: 4, D: 64}
		}
		t.Run(spec, func(t *testing.T) {
			cfg := &model.Config{Architecture: "test", Layers: 2, Heads: sh.Hq, KVHeads: sh.Hkv, HeadDim: sh.D, MaxPositions: 4096}
			gc, err := NewPaged(be, cfg, kv.MustParseSpec(spec), kvcache.Options{MaxSeqs: 4, MaxLen: 2048, MaxChunk: 512})
			if err != nil {
				t.Fatal(err)
			}
			lk := gc.kern[0]
			if want := lk.lay.KBits < 16 && lk.lay.VBits < 16; lk.fa == nil || lk.fa.Dequantizes() != want || (gc.faScratch.Pool != 0) != want {
				t.Errorf("%s: prefill plan %v, dequantizing route and scratch copy %v, want the route %v", spec, lk.fa != nil, gc.faScratch.Pool != 0, want)
			}
			gc.Close()
			runGPUSteps(t, be, spec, sh, rand.New(rand.NewPCG(uint64(40+i), 7)), 2048, 512, scenario)
		})
	}
}

// TestGPUStagingSameBits: the staging slots (rounds.go) change where a
// batch's blocks wait to be packed, never a bit. The same batches of
// random keys, values and queries (aligned and unaligned chunks, chunks of
// more blocks than the staging slots, decode steps beside them) through a
// cache without staging slots (every block from its sequence's own slot,
// a round each: session 30's plan) and through caches with 1, 2 and the
// default number give equal outputs element for element, every layer of
// every step.
func TestGPUStagingSameBits(t *testing.T) {
	be := gpuBackend(t)
	for i, spec := range []string{"int4:rot", "fp16", "int2", "k4v2:kt64:res64"} {
		sh := attn.Shape{Hq: 12, Hkv: 4, D: 128}
		if i%2 == 1 {
			sh = attn.Shape{Hq: 8, Hkv: 1, D: 64}
		}
		t.Run(spec, func(t *testing.T) {
			cfg := &model.Config{Architecture: "test", Layers: 2, Heads: sh.Hq, KVHeads: sh.Hkv, HeadDim: sh.D, MaxPositions: 4096}
			var ref [][]float32
			for _, stage := range []int{0, 1, 2, -1} {
				gc, err := NewPaged(be, cfg, kv.MustParseSpec(spec), kvcache.Options{MaxSeqs: 4, MaxLen: 4096, MaxChunk: 2048})
				if err != nil {
					t.Fatal(err)
				}
				nr := gc.format.Residual
				if stage >= 0 {
					gc.stage = stage // a smaller use of the slots Open allocated
				} else if gc.stage != stageSlots(2048, nr) {
					t.Fatalf("%d staging slots, want %d", gc.stage, stageSlots(2048, nr))
				} else if got, want := kvcache.StagingBytes(gc), int64(gc.stage)*gc.ResidualBytes(); got != want || got == 0 {
					t.Fatalf("StagingBytes %d, want %d", got, want)
				}
				steps := []gpuStep{
					{ids: []int{1}, lens: []int{4*nr + 7}},             // aligned, to a tail
					{ids: []int{2, 1}, lens: []int{2 * nr, 1}},         // aligned, to a block's end; a decode step
					{ids: []int{1}, lens: []int{3*nr - 8}},             // inside a block, to a block's end
					{ids: []int{1, 2}, lens: []int{nr + 5, 1}},         // inside a block, to a tail (two rounds)
					{ids: []int{3, 2, 1}, lens: []int{5*nr - 3, 1, 1}}, // more blocks than 1 or 2 slots
					{ids: []int{2, 3}, lens: []int{nr + 5, 1}},         // inside a block, to a tail
				}
				r := rand.New(rand.NewPCG(uint64(i), 31))
				n := 0
				for si, step := range steps {
					var b model.Batch
					for j, id := range step.ids {
						b.Add(id, gc.Len(id), make([]int32, step.lens[j])...)
					}
					if err := gc.Begin(&b); err != nil {
						t.Fatalf("stage %d step %d: %v", stage, si, err)
					}
					for l := range cfg.Layers {
						_, _, _, got := attendRandom(t, be, gc, l, &b, sh, r)
						if stage == 0 {
							ref = append(ref, got)
						} else if j := slices.IndexFunc(got, func(x float32) bool { return x != x }); j >= 0 {
							t.Fatalf("stage %d step %d layer %d: NaN at %d", stage, si, l, j)
						} else {
							for e := range got {
								if math.Float32bits(got[e]) != math.Float32bits(ref[n][e]) {
									t.Fatalf("stage %d step %d layer %d: element %d is %v, %v without staging slots", stage, si, l, e, got[e], ref[n][e])
								}
							}
						}
						n++
					}
				}
				gc.Close()
			}
		})
	}
}

// TestGPUCacheLengthBuckets: a cache of 16K tokens a sequence whose
// sequences hold 1-2.1K: decode runs are planned and launched for their
// length bucket (Paged.lenBucket: 1024, then 2048, then 4096 as the
// longest crosses each), not for MaxLen, and every output stays within
// the reference's bound across the crossings (int4 and int2 at D 128, GQA
// 3; fp16 at D 64, MQA).
func TestGPUCacheLengthBuckets(t *testing.T) {
	be := gpuBackend(t)
	scenario := func(nr int) []gpuStep {
		steps := []gpuStep{{ids: []int{1}, lens: []int{500}}, {ids: []int{1}, lens: []int{500}}, {ids: []int{2}, lens: []int{30}}}
		for range 30 { // sequence 1: 1001 -> 1030 tokens, across 1024
			steps = append(steps, gpuStep{ids: []int{2, 1}, lens: []int{1, 1}})
		}
		steps = append(steps, gpuStep{ids: []int{1}, lens: []int{500}}, gpuStep{ids: []int{1}, lens: []int{510}})
		for range 12 { // 2040 -> 2051, across 2048
			steps = append(steps, gpuStep{ids: []int{1, 2}, lens: []int{1, 1}})
		}
		return steps
	}
	for i, c := range []struct {
		spec string
		sh   attn.Shape
	}{{"int4", attn.Shape{Hq: 12, Hkv: 4, D: 128}}, {"int2", attn.Shape{Hq: 12, Hkv: 4, D: 128}}, {"fp16", attn.Shape{Hq: 8, Hkv: 1, D: 64}}} {
		t.Run(c.spec, func(t *testing.T) {
			keys := runGPUSteps(t, be, c.spec, c.sh, rand.New(rand.NewPCG(uint64(i), 11)), 16384, 512, scenario)
			var lens []int
			for _, k := range keys {
				if !slices.Contains(lens, k.maxL) {
					lens = append(lens, k.maxL)
				}
			}
			slices.Sort(lens)
			if !slices.Equal(lens, []int{1024, 2048, 4096}) {
				t.Errorf("decode plans' lengths %v (keys %v), want 1024, 2048 and 4096", lens, keys)
			}
		})
	}
}

// rotateRows returns kv.Rotate of each row of d values of x (a copy).
func rotateRows(x []float32, d int) []float32 {
	out := append([]float32(nil), x...)
	for i := 0; i+d <= len(out); i += d {
		kv.Rotate(out[i : i+d])
	}
	return out
}

// rotationTol is what comparing a rotated format's outputs in the rotated
// frame adds to the bound. A float32 Walsh-Hadamard transform of a vector
// with entries within M errs by at most log2(D)·sqrt(D)·eps·M per entry
// (each of the log2(D) stages rounds sums of up to D·M, scaled by
// 1/sqrt(D)). Three transforms meet here: the GPU's back-rotation of its
// output (M = MaxAbsV, the rotated values' bound, its error carried into
// the rotated frame by the test's transform, times sqrt(D)), and the test's
// transforms of the GPU's and the reference's unrotated outputs (M =
// sqrt(D)·MaxAbsV): 3·log2(D)·D·eps·MaxAbsV in all, with eps = 2^-23 for
// slack.
func rotationTol(f kv.Format, d int, st attn.RefStats) float64 {
	if !f.Rotate {
		return 0
	}
	const eps = 1.0 / (1 << 23)
	return 3 * math.Log2(float64(d)) * float64(d) * eps * st.MaxAbsV
}

// attendRandom runs layer l of batch b through att with random fp16-exact
// queries and KV-like keys and values (kvtest.KeysValues) for the batch's
// tokens, and returns them with the output.
func attendRandom(t *testing.T, be *gpu.Backend, att model.Attention, l int, b *model.Batch, sh attn.Shape, r *rand.Rand) (q, k, v, out []float32) {
	t.Helper()
	T := len(b.Tokens)
	qw, kvw := sh.Hq*sh.D, sh.Hkv*sh.D
	q = make([]float32, T*qw)
	for i := range q {
		q[i] = half.ToFloat32(half.FromFloat32(float32(r.NormFloat64()))) // the GPU attends with fp16 queries
	}
	k, v = kvtest.KeysValues(r, T, sh.Hkv, sh.D)
	var ts [4]backend.Tensor
	for i, w := range []int{qw, kvw, kvw, qw} {
		var err error
		if ts[i], err = be.Alloc(backend.F32, T, w); err != nil {
			t.Fatal(err)
		}
		defer be.Free(ts[i])
	}
	for i, src := range [][]float32{q, k, v} {
		if err := be.Upload(ts[i], src); err != nil {
			t.Fatal(err)
		}
	}
	if err := att.Attend(l, b, ts[0], ts[1], ts[2], ts[3]); err != nil {
		t.Fatalf("layer %d: %v", l, err)
	}
	out = make([]float32, T*qw)
	if err := be.Download(out, ts[3]); err != nil {
		t.Fatal(err)
	}
	return q, k, v, out
}

// checkGPU compares outputs with the reference within the tensor-core
// kernel's bound (kvtest.DecodeTol) plus the fp16 rounding of the output.
func checkGPU(t *testing.T, what string, f kv.Format, sh attn.Shape, st attn.RefStats, got, want []float32) {
	t.Helper()
	checkGPUExtra(t, what, f, sh, st, got, want, 0)
}

// checkGPUExtra is checkGPU with extra added to every element's bound.
func checkGPUExtra(t *testing.T, what string, f kv.Format, sh attn.Shape, st attn.RefStats, got, want []float32, extra float64) {
	t.Helper()
	d := sh.D
	for row := range len(got) / d {
		tol := kvtest.DecodeTol(f, st, d, row, true) + extra
		for ch := range d {
			g, w := float64(got[row*d+ch]), float64(want[row*d+ch])
			if g != g || math.Abs(g-w) > tol+math.Abs(w)/1024 {
				t.Fatalf("%s: row %d channel %d: got %g, want %g (tol %.3g)", what, row, ch, g, w, tol+math.Abs(w)/1024)
			}
		}
	}
}

// TestGPUCacheBatchInvariant decodes one sequence alone and inside a batch
// (kvcache.Options.BatchInvariant) with two others: its outputs must be the
// same bits. "short": every sequence splits at 512 tokens (biSplit); alone,
// sequence 0's decode runs are planned for 4096 tokens (lenBucket), beside
// sequence 2 (4000+) for 8192. "long": sequence 0 (9000+, splits of 1024)
// beside one of 20000+ (2048) and one of 70000+ (4096, 18 splits: past
// the cap, whose split stops growing), planned for 128K, so that its CTAs'
// guess of their first block (the longest's split) is wrong; alone its
// run is planned for 16K, whose split is its own.
func TestGPUCacheBatchInvariant(t *testing.T) {
	be := gpuBackend(t)
	sh := attn.Shape{Hq: 28, Hkv: 4, D: 128} // group 7
	sp := kv.MustParseSpec("int4")
	qw, kvw := sh.Hq*sh.D, sh.Hkv*sh.D
	for _, c := range []struct {
		name   string
		maxLen int
		lens   [3]int
	}{
		{"short", 16384, [3]int{3000, 700, 4000}},
		{"long", 131072, [3]int{9000, 20000, 70000}},
	} {
		t.Run(c.name, func(t *testing.T) { testCacheBatchInvariant(t, be, sh, sp, qw, kvw, c.maxLen, c.lens) })
	}
}

// testCacheBatchInvariant is TestGPUCacheBatchInvariant's case of a cache
// of maxLen tokens and sequences of lens tokens (sequence 0 the one alone).
func testCacheBatchInvariant(t *testing.T, be *gpu.Backend, sh attn.Shape, sp kv.Spec, qw, kvw, maxLen int, lens [3]int) {
	cfg := &model.Config{Architecture: "test", Layers: 1, Heads: sh.Hq, KVHeads: sh.Hkv, HeadDim: sh.D, MaxPositions: maxLen}
	run := func(others bool) [][]float32 {
		r := rand.New(rand.NewPCG(1, 2))
		gc, err := NewPaged(be, cfg, sp, kvcache.Options{MaxSeqs: 3, MaxLen: maxLen, MaxChunk: 512, BatchInvariant: true})
		if err != nil {
			t.Fatal(err)
		}
		defer gc.Close()
		if err := gc.FillRandom(0, lens[0], 5); err != nil {
			t.Fatal(err)
		}
		if others {
			if err := gc.FillRandom(1, lens[1], 6); err != nil {
				t.Fatal(err)
			}
			if err := gc.FillRandom(2, lens[2], 7); err != nil {
				t.Fatal(err)
			}
		}
		var outs [][]float32
		for range 20 {
			var b model.Batch
			b.Add(0, gc.Len(0), 0)
			if others {
				b.Add(1, gc.Len(1), 0)
				b.Add(2, gc.Len(2), 0)
			}
			T := len(b.Tokens)
			q := make([]float32, qw)
			for i := range q {
				q[i] = float32(r.NormFloat64())
			}
			k, v := kvtest.KeysValues(r, 1, sh.Hkv, sh.D)
			qa, ka, va := make([]float32, T*qw), make([]float32, T*kvw), make([]float32, T*kvw)
			for i := range T { // every sequence gets the same new token: only the cache differs
				copy(qa[i*qw:], q)
				copy(ka[i*kvw:], k)
				copy(va[i*kvw:], v)
			}
			if err := gc.Begin(&b); err != nil {
				t.Fatal(err)
			}
			var ts [4]backend.Tensor
			for i, w := range []int{qw, kvw, kvw, qw} {
				if ts[i], err = be.Alloc(backend.F32, T, w); err != nil {
					t.Fatal(err)
				}
				defer be.Free(ts[i])
			}
			for i, src := range [][]float32{qa, ka, va} {
				if err := be.Upload(ts[i], src); err != nil {
					t.Fatal(err)
				}
			}
			if err := gc.Attend(0, &b, ts[0], ts[1], ts[2], ts[3]); err != nil {
				t.Fatal(err)
			}
			out := make([]float32, T*qw)
			if err := be.Download(out, ts[3]); err != nil {
				t.Fatal(err)
			}
			for _, x := range out {
				if x != x {
					t.Fatal("NaN in the output")
				}
			}
			outs = append(outs, out[:qw])
		}
		return outs
	}
	solo, batched := run(false), run(true)
	for s := range solo {
		for i := range solo[s] {
			if math.Float32bits(solo[s][i]) != math.Float32bits(batched[s][i]) {
				t.Fatalf("step %d element %d: solo %g, batched %g: the batch changed a sequence's result", s, i, solo[s][i], batched[s][i])
			}
		}
	}
}

// TestGPUCacheGolden generates greedily with gocoder-23m on the GPU with an
// fp16 GPU KV cache (golden.json's tokens) and with int4 (agreement logged).
func TestGPUCacheGolden(t *testing.T) {
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
	for _, spec := range []string{"fp16", "int8", "int4"} {
		match, total := 0, 0
		for pi, p := range g.Prompts {
			c, err := NewPaged(be, m.Config(), kv.MustParseSpec(spec), kvcache.Options{MaxSeqs: 1, MaxLen: len(p.IDs) + len(p.Greedy) + 1, MaxChunk: 64})
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
			match, total = match+n, total+len(p.Greedy)
			if spec == "fp16" && n != len(p.Greedy) {
				t.Errorf("fp16 GPU KV cache, prompt %d: greedy tokens follow golden.json for %d of %d", pi, n, len(p.Greedy))
			}
		}
		t.Logf("%s GPU KV cache: %d of %d golden greedy tokens before the first divergence", spec, match, total)
	}
}

// TestGPUScheduler serves gocoder-23m prompts through the scheduler with a
// GPUCache: every request finishes with its token budget, the cache holds
// no block or slot afterwards, and each text is compared with a solo GPU
// run (logged: on the GPU a batch of more than kernels.GEMVMaxRows tokens
// takes cuBLASLt, whose sums differ from the decode GEMV's, so batched and
// solo greedy texts may part after a near-tie).
func TestGPUScheduler(t *testing.T) {
	dir := testmodel.Dir(t)
	be := gpuBackend(t)
	m, err := model.Load(dir, be, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	prompts := []string{"func main() {", "package http\n\nimport (", "// Copyright 2024", "type Server struct {", "for i := 0; i < n; i++ {", "if err != nil {"}
	const maxTokens = 200
	for _, spec := range []string{"int4", "int2"} {
		solo := make([]string, len(prompts))
		for i, p := range prompts {
			c, err := NewPaged(be, m.Config(), kv.MustParseSpec(spec), kvcache.Options{MaxSeqs: 1, MaxLen: 512, MaxChunk: 256})
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			if _, err := engine.Generate(context.Background(), m, tok, c, 0, tok.Encode(p, true), engine.GenerateOptions{MaxTokens: maxTokens, ChunkTokens: 256, StopIDs: []int{}},
				func(s string) { out.WriteString(s) }); err != nil {
				t.Fatal(err)
			}
			c.Close()
			solo[i] = out.String()
		}
		gc, err := NewPaged(be, m.Config(), kv.MustParseSpec(spec), kvcache.Options{MaxSeqs: 4, MaxLen: 512, MaxChunk: 256, Blocks: 3})
		if err != nil {
			t.Fatal(err)
		}
		s, err := engine.NewScheduler(m, tok, gc, engine.SchedulerOptions{PrefillChunk: 256})
		if err != nil {
			t.Fatal(err)
		}
		streams := make([]*engine.Stream, len(prompts))
		for i, p := range prompts {
			if streams[i], err = s.Submit(context.Background(), engine.Request{Prompt: tok.Encode(p, true), MaxTokens: maxTokens, StopIDs: []int{}}); err != nil {
				t.Fatal(err)
			}
		}
		same := 0
		for i := range prompts {
			got, res := collect(t, streams[i])
			if res.CompletionTokens != maxTokens {
				t.Errorf("%s prompt %d: %d tokens (%s), want %d", spec, i, res.CompletionTokens, res.FinishReason, maxTokens)
			}
			if got == solo[i] {
				same++
			}
		}
		s.Close()
		if gc.FreeBlocks() != gc.TotalBlocks() || gc.FreeSlots() != gc.MaxSeqs() {
			t.Errorf("%s: after the requests %d of %d blocks and %d of %d slots are free", spec, gc.FreeBlocks(), gc.TotalBlocks(), gc.FreeSlots(), gc.MaxSeqs())
		}
		gc.Close()
		t.Logf("%s: %d of %d batched texts (4 slots, 3 blocks: queueing and preemption) equal their solo GPU run", spec, same, len(prompts))
	}
}

// collect reads a scheduler stream to its end.
func collect(t testing.TB, st *engine.Stream) (string, engine.Result) {
	t.Helper()
	var b strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		text, done, err := st.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(text)
		if done {
			return b.String(), st.Result()
		}
	}
}

// TestGPUPerLayerFormats runs gocoder-23m on the GPU with per-layer
// formats (blocks of 32 tokens, so the prompts are packed): overrides that
// name the base's format give the same tokens bit for bit, and a mixed spec
// (int2 with its first and last layers int8) runs, keeps each layer in its
// own pool, and follows golden.json at least as long as uniform int2.
func TestGPUPerLayerFormats(t *testing.T) {
	dir := testmodel.Dir(t)
	be := gpuBackend(t)
	m, err := model.Load(dir, be, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	prompt := tok.Encode(strings.Repeat("func (s *Server) handle(w http.ResponseWriter, r *http.Request) {\n\tif err := s.check(r); err != nil {\n", 6), true)
	gen := func(spec string) []int {
		c, err := NewPaged(be, m.Config(), kv.MustParseSpec(spec), kvcache.Options{MaxSeqs: 1, MaxLen: len(prompt) + 65, MaxChunk: 64})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if want := kvcache.BlockBytesOf(c.formats(), m.Config().KVHeads); c.BlockBytes() != want {
			t.Errorf("%s: block bytes %d, want %d", spec, c.BlockBytes(), want)
		}
		st, err := engine.Generate(context.Background(), m, tok, c, 0, prompt, engine.GenerateOptions{MaxTokens: 64, StopIDs: []int{}, ChunkTokens: 64}, func(string) {})
		if err != nil {
			t.Fatal(err)
		}
		return st.Tokens
	}
	base := gen("int4:kc32:v32:res32")
	same := gen("int4:kc32:v32:res32@0..-1=int4:kc32:v32:res32")
	if fmt.Sprint(base) != fmt.Sprint(same) {
		t.Errorf("overrides naming the base format changed the tokens:\n%v\n%v", base, same)
	}
	fp16 := gen("fp16:res32")
	agree := func(a []int) int {
		n := 0
		for n < len(a) && a[n] == fp16[n] {
			n++
		}
		return n
	}
	int2 := gen("int2:kc32:v32:res32")
	mixed := gen("int2:kc32:v32:res32@0+-1=int8:kc32:res32")
	t.Logf("tokens equal to fp16's before the first difference (of 64): int4 %d, int2 %d, int2 with int8 first and last layers %d", agree(base), agree(int2), agree(mixed))
}

// TestGPUKernelsSharedAcrossCaches: two caches whose formats differ only in
// the residual size compile the same pack program, so their plans share a
// kernel; making the smaller one after the larger must not lower the shared
// memory limit that the larger one's launches need (eval ppl with
// int2@0=int8 and int4@0=int8 once failed so: int8 at res256 stages 64 KiB,
// at res128 32 KiB). The larger cache, used after the smaller was made,
// must give the tokens it gives alone.
func TestGPUKernelsSharedAcrossCaches(t *testing.T) {
	dir := testmodel.Dir(t)
	be := gpuBackend(t)
	m, err := model.Load(dir, be, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	prompt := tok.Encode(strings.Repeat("func (s *Server) handle(w http.ResponseWriter, r *http.Request) {\n", 40), true)
	newCache := func(spec string) *Paged {
		c, err := NewPaged(be, m.Config(), kv.MustParseSpec(spec), kvcache.Options{MaxSeqs: 1, MaxLen: len(prompt) + 33, MaxChunk: 256})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	gen := func(c *Paged) []int {
		st, err := engine.Generate(context.Background(), m, tok, c, 0, prompt, engine.GenerateOptions{MaxTokens: 32, StopIDs: []int{}, ChunkTokens: 256}, func(string) {})
		if err != nil {
			t.Fatal(err)
		}
		c.Remove(0)
		return st.Tokens
	}
	large := newCache("int8:res256")
	defer large.Close()
	alone := gen(large)
	small := newCache("int8:res128")
	defer small.Close()
	after := gen(large)
	if fmt.Sprint(alone) != fmt.Sprint(after) {
		t.Errorf("int8:res256 after an int8:res128 cache was made gives other tokens:\n%v\n%v", alone, after)
	}
	gen(small)
}

// loadGocoder loads gocoder-23m and its tokenizer on the GPU, or skips.
func loadGocoder(t *testing.T) (model.Model, *tokenizer.Tokenizer) {
	t.Helper()
	dir := testmodel.Dir(t)
	be := gpuBackend(t)
	m, err := model.Load(dir, be, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return m, tok
}

// prefixChunk is the prefill chunk of the prefix tests: two blocks of the
// res32 formats, so that prompts of a few hundred tokens span several
// canonical chunks.
const prefixChunk = 64

// prefixSpecs are the formats the prefix tests run (blocks of 32 tokens).
var prefixSpecs = []string{"int4:kc32:v32:res32", "int2:kc32:v32:res32", "fp16:res32"}

// prefixOptions are the cache options of the prefix tests; a cache that a
// result is compared with must plan the same kernels, so only Blocks
// differs between them.
func prefixOptions(chunk, blocks int) kvcache.Options {
	return kvcache.Options{MaxSeqs: 4, MaxLen: 1024, MaxChunk: chunk, Blocks: blocks}
}

// gpuGen is a sequence generated greedily, batch by batch, with every
// logit row it sampled from kept for bitwise comparison.
type gpuGen struct {
	id     int
	prompt []int
	steps  int // tokens to generate
	n      int // tokens in the cache
	tokens []int
	logits [][]float32
}

func (g *gpuGen) done() bool { return len(g.tokens) >= g.steps }

// segment returns g's part of the next batch: its next prefill chunk,
// ending at a multiple of chunk as the scheduler cuts them, or its last
// generated token.
func (g *gpuGen) segment(chunk int) []int32 {
	ctx := append(slices.Clone(g.prompt), g.tokens...)
	end := len(ctx)
	if g.n < len(g.prompt) {
		end = min(len(g.prompt), (g.n/chunk+1)*chunk)
	}
	ids := make([]int32, end-g.n)
	for i, v := range ctx[g.n:end] {
		ids[i] = int32(v)
	}
	return ids
}

// stepGens runs one batch of every unfinished sequence of gens, in order,
// on cache c; a sequence whose context is all cached samples its next
// token (the first maximum of its logits).
func stepGens(t *testing.T, m model.Model, c *Paged, chunk int, gens ...*gpuGen) {
	t.Helper()
	var b model.Batch
	var in []*gpuGen
	for _, g := range gens {
		if !g.done() {
			b.Add(g.id, g.n, g.segment(chunk)...)
			in = append(in, g)
		}
	}
	if len(in) == 0 {
		t.Fatal("stepGens: every sequence is done")
	}
	lg, err := m.Forward(&b, c)
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range in {
		g.n += b.Seqs[i].Len
		if g.n == len(g.prompt)+len(g.tokens) {
			row := slices.Clone(lg.Row(i))
			g.logits = append(g.logits, row)
			best := 0
			for v := range row {
				if row[v] > row[best] {
					best = v
				}
			}
			g.tokens = append(g.tokens, best)
		}
	}
}

// runAlone generates g to the end, each batch holding g alone.
func runAlone(t *testing.T, m model.Model, c *Paged, chunk int, g *gpuGen) {
	t.Helper()
	for !g.done() {
		stepGens(t, m, c, chunk, g)
	}
}

// openGen opens g in c and checks that the cache holds want of its tokens.
func openGen(t *testing.T, c *Paged, g *gpuGen, want int) {
	t.Helper()
	n, err := c.Open(g.id, g.prompt)
	if err != nil {
		t.Fatal(err)
	}
	if n != want {
		t.Fatalf("sequence %d: %d prompt tokens of %d cached, want %d", g.id, n, len(g.prompt), want)
	}
	g.n = n
}

// sameGen fails unless a and b generated the same tokens from logits
// equal bit for bit.
func sameGen(t *testing.T, what string, a, b *gpuGen) {
	t.Helper()
	if !slices.Equal(a.tokens, b.tokens) {
		t.Errorf("%s: tokens differ:\n%v\n%v", what, a.tokens, b.tokens)
		return
	}
	for s := range a.logits {
		for v := range a.logits[s] {
			if math.Float32bits(a.logits[s][v]) != math.Float32bits(b.logits[s][v]) {
				t.Errorf("%s: step %d logit %d: %g and %g are not the same bits", what, s, v, a.logits[s][v], b.logits[s][v])
				return
			}
		}
	}
}

// freshGen generates prompt in a new cache of options o, alone: the
// reference a sequence with a shared prefix must match bit for bit.
func freshGen(t *testing.T, m model.Model, sp kv.Spec, o kvcache.Options, prompt []int, steps int) *gpuGen {
	t.Helper()
	c, err := NewPaged(gpuBackend(t), m.Config(), sp, o)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	g := &gpuGen{id: 1, prompt: prompt, steps: steps}
	openGen(t, c, g, 0)
	runAlone(t, m, c, o.MaxChunk, g)
	c.Remove(g.id)
	if err := c.CheckIdle(); err != nil {
		t.Fatal(err)
	}
	return g
}

// Lengths of the prefix tests' prompts: a common prefix P of four chunks
// of 64 and 40 tokens (two chunks of 128 and 40), A = P and 10 tokens (no
// further whole chunk), B = P and 150 tokens (whole chunks up to 384).
const (
	prefixLen  = 4*prefixChunk + 40
	prefixALen = prefixLen + 10
	prefixBLen = prefixLen + 150
)

// prefixPrompts returns the common prefix P and the prompts A and B of
// the prefix tests (cut from Go source text to exact lengths), whose
// continuations of P differ from their first token.
func prefixPrompts(t *testing.T, tok *tokenizer.Tokenizer) (p, a, b []int) {
	t.Helper()
	text := tok.Encode(strings.Repeat("// Server routes each request to its handler and logs the status.\nfunc (s *Server) handle(w http.ResponseWriter, r *http.Request) {\n", 12), true)
	x := tok.Encode("\treturn s.mux.ServeHTTP(w, r)\n}\n\nfunc (s *Server) Close() error {\n", false)
	y := tok.Encode(strings.Repeat("name := r.URL.Query().Get(\"name\")\n\tif name == \"\" {\n\t\thttp.Error(w, \"no name\", http.StatusBadRequest)\n\t\treturn\n\t}\n\t", 6), false)
	if len(text) < prefixLen || len(x) < prefixALen-prefixLen || len(y) < prefixBLen-prefixLen || x[0] == y[0] {
		t.Fatalf("test prompts: %d, %d and %d tokens, first tokens of the continuations %d and %d", len(text), len(x), len(y), x[0], y[0])
	}
	p = text[:prefixLen]
	a = append(slices.Clone(p), x[:prefixALen-prefixLen]...)
	b = append(slices.Clone(p), y[:prefixBLen-prefixLen]...)
	return p, a, b
}

// commonChunks returns how many leading chunks of prompt b a cache offers
// after prompt a ran alone in canonical chunks: the whole chunks before
// b's last token that are whole in a and hold the same tokens.
func commonChunks(a, b []int, chunk int) int {
	k := 0
	for (k+1)*chunk <= len(b)-1 && (k+1)*chunk <= len(a) && slices.Equal(a[:(k+1)*chunk], b[:(k+1)*chunk]) {
		k++
	}
	return k
}

// TestGPUPrefixSharing runs prompt A = P+X, then B = P+Y with P's whole
// canonical chunks shared: B's greedy tokens and logits equal, bit for bit,
// those of B in a fresh cache; the shared blocks hold a reference per
// table and cost no new block. B's own canonical chunks are shared by a
// third run of B. A computed with another prefill chunk shares nothing.
// Per format and per prefill chunk (64 and 128 tokens).
func TestGPUPrefixSharing(t *testing.T) {
	m, tok := loadGocoder(t)
	be := gpuBackend(t)
	p, pa, pb := prefixPrompts(t, tok)
	const steps = 24
	// MaxChunk is rounded up to whole blocks, as the scheduler rounds its
	// prefill chunk: the chunks it cuts fit and are shared.
	c, err := NewPaged(be, m.Config(), kv.MustParseSpec(prefixSpecs[0]), prefixOptions(prefixChunk-10, 0))
	if err != nil {
		t.Fatal(err)
	}
	if c.opts.MaxChunk != prefixChunk || c.SharedChunk() != prefixChunk {
		t.Errorf("MaxChunk %d in blocks of 32: chunk %d, shared chunk %d; want %d", prefixChunk-10, c.opts.MaxChunk, c.SharedChunk(), prefixChunk)
	}
	c.Close()
	for _, spec := range prefixSpecs {
		sp := kv.MustParseSpec(spec)
		for _, chunk := range []int{prefixChunk, 2 * prefixChunk} {
			t.Run(fmt.Sprintf("%s/chunk%d", spec, chunk), func(t *testing.T) {
				o := prefixOptions(chunk, 0)
				want := freshGen(t, m, sp, o, pb, steps)
				c, err := NewPaged(be, m.Config(), sp, o)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				if c.SharedChunk() != chunk {
					t.Fatalf("shared chunk %d, want %d", c.SharedChunk(), chunk)
				}
				a := &gpuGen{id: 1, prompt: pa, steps: steps}
				openGen(t, c, a, 0)
				runAlone(t, m, c, chunk, a)
				used := c.TotalBlocks() - c.FreeBlocks()
				b := &gpuGen{id: 2, prompt: pb, steps: steps}
				shared := commonChunks(pa, pb, chunk) * chunk
				if shared != len(p)/chunk*chunk || shared == 0 {
					t.Fatalf("A and B share %d tokens of whole chunks of %d; the common prefix is %d tokens", shared, chunk, len(p))
				}
				openGen(t, c, b, shared)
				if u := c.TotalBlocks() - c.FreeBlocks(); u != used {
					t.Errorf("sharing took %d new blocks", u-used)
				}
				for i, blk := range c.book.seqs[2].blocks {
					if refs := c.book.alloc.Refs(int(blk)); refs != 2 {
						t.Errorf("shared block %d (id %d) has %d references, want 2", i, blk, refs)
					}
				}
				runAlone(t, m, c, chunk, b)
				sameGen(t, "B with P from the cache vs B in a fresh cache", want, b)
				c.Remove(1)
				c.Remove(2)
				if err := c.CheckIdle(); err != nil {
					t.Fatal(err)
				}
				// B's own chunks, computed after the shared ones, are shared too.
				b2 := &gpuGen{id: 3, prompt: pb, steps: steps}
				openGen(t, c, b2, lookupChunks(len(pb), chunk, o.MaxLen)*chunk)
				runAlone(t, m, c, chunk, b2)
				sameGen(t, "B with all its whole chunks from the cache vs B in a fresh cache", want, b2)
				c.Remove(3)
				if err := c.CheckIdle(); err != nil {
					t.Fatal(err)
				}
				t.Logf("%d of B's %d prompt tokens from A's blocks, %d from its own; %d blocks cached", shared, len(pb), b2.n, c.CachedBlocks())
			})
		}
		t.Run(spec+"/other-chunk", func(t *testing.T) {
			o := prefixOptions(prefixChunk, 0)
			want := freshGen(t, m, sp, o, pb, steps)
			c, err := NewPaged(be, m.Config(), sp, o)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			a := &gpuGen{id: 1, prompt: pa, steps: steps}
			openGen(t, c, a, 0)
			runAlone(t, m, c, prefixChunk/2, a) // chunks of 32: their rows may be other bits
			c.Remove(1)
			if c.CachedBlocks() != 0 {
				t.Errorf("chunks of %d tokens in a cache of chunk %d cached %d blocks", prefixChunk/2, prefixChunk, c.CachedBlocks())
			}
			b := &gpuGen{id: 2, prompt: pb, steps: steps}
			openGen(t, c, b, 0)
			runAlone(t, m, c, prefixChunk, b)
			sameGen(t, "B after A in chunks of another length vs B in a fresh cache", want, b)
			c.Remove(2)
			if err := c.CheckIdle(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestGPUPrefixBatched runs B = P+Y beside two other sequences that
// decode: its remaining prompt chunks and decode steps share their batches
// with them. With P's chunks from the cache (computed alone by A) B gives
// the bits it gives when it computes P alone itself and then runs in the
// same batches: the cached blocks hold what a computation alone writes.
// B's chunks that ran beside the others are not shared.
func TestGPUPrefixBatched(t *testing.T) {
	m, tok := loadGocoder(t)
	be := gpuBackend(t)
	p, pa, pb := prefixPrompts(t, tok)
	o1 := tok.Encode("package main\n\nimport \"fmt\"\n\nfunc main() {\n", true)
	o2 := tok.Encode("type Cache struct {\n\tmu sync.Mutex\n\tm  map[string][]byte\n}\n\nfunc (c *Cache) Get(k string) ([]byte, bool) {\n", true)
	const chunk = prefixChunk
	shared := commonChunks(pa, pb, chunk) * chunk
	if shared != len(p)/chunk*chunk {
		t.Fatalf("A and B share %d tokens of whole chunks; the common prefix is %d tokens", shared, len(p))
	}
	for _, spec := range prefixSpecs {
		sp := kv.MustParseSpec(spec)
		t.Run(spec, func(t *testing.T) {
			run := func(fromCache bool) *gpuGen {
				c, err := NewPaged(be, m.Config(), sp, prefixOptions(chunk, 0))
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				if fromCache {
					a := &gpuGen{id: 1, prompt: pa, steps: 4}
					openGen(t, c, a, 0)
					runAlone(t, m, c, chunk, a)
					c.Remove(1)
				}
				others := []*gpuGen{{id: 11, prompt: o1, steps: 64}, {id: 12, prompt: o2, steps: 64}}
				for _, g := range others {
					openGen(t, c, g, 0)
					for g.n < len(g.prompt) {
						stepGens(t, m, c, chunk, g)
					}
				}
				b := &gpuGen{id: 2, prompt: pb, steps: 24}
				if fromCache {
					openGen(t, c, b, shared)
				} else {
					openGen(t, c, b, 0)
					for b.n < shared { // P's chunks alone, as A computed them
						stepGens(t, m, c, chunk, b)
					}
				}
				for !b.done() {
					stepGens(t, m, c, chunk, others[0], others[1], b)
				}
				for _, g := range others {
					if g.done() {
						t.Fatalf("sequence %d finished before B: B ran alone at the end", g.id)
					}
				}
				for _, id := range []int{2, 11, 12} {
					c.Remove(id)
				}
				// Only P's chunks are cached: B's later ones ran beside the others.
				probe := &gpuGen{id: 3, prompt: pb}
				openGen(t, c, probe, shared)
				c.Remove(3)
				if err := c.CheckIdle(); err != nil {
					t.Fatal(err)
				}
				return b
			}
			sameGen(t, "B batched with P from the cache vs B batched after computing P alone", run(false), run(true))
		})
	}
}

// TestGPUPrefixEviction fills a small pool after A = P+X was cached: the
// pool reclaims cached blocks when no other is free, a prefix losing its
// last block first, and a chunk that lost a block is computed again. B =
// P+Y gives the bits of a fresh cache whatever was evicted, also after
// every cached block was reused.
func TestGPUPrefixEviction(t *testing.T) {
	m, tok := loadGocoder(t)
	be := gpuBackend(t)
	p, pa, pb := prefixPrompts(t, tok)
	const chunk, steps = prefixChunk, 16
	filler := func(blocks, base int) []int { // synthetic token ids, a whole number of blocks
		ids := make([]int, blocks*32)
		for i := range ids {
			ids[i] = base + i%1000
		}
		return ids
	}
	for _, spec := range prefixSpecs {
		sp := kv.MustParseSpec(spec)
		t.Run(spec, func(t *testing.T) {
			want := freshGen(t, m, sp, prefixOptions(chunk, 0), pb, steps)
			blocks := (len(pa)+steps)/32 + 6
			c, err := NewPaged(be, m.Config(), sp, prefixOptions(chunk, blocks))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if c.BlockTokens() != 32 {
				t.Fatalf("blocks of %d tokens, want 32", c.BlockTokens())
			}
			a := &gpuGen{id: 1, prompt: pa, steps: steps}
			openGen(t, c, a, 0)
			runAlone(t, m, c, chunk, a)
			c.Remove(1)
			cached := c.CachedBlocks()
			if cached != len(pa)/chunk*chunk/32 {
				t.Fatalf("%d blocks cached after A, want its %d whole chunks' %d", cached, len(pa)/chunk, len(pa)/chunk*chunk/32)
			}
			// D takes every block that holds no prefix, and one more: A's
			// last cached block.
			d := &gpuGen{id: 4, prompt: filler(c.FreeBlocks()-cached+1, 2000), steps: 1}
			openGen(t, c, d, 0)
			runAlone(t, m, c, chunk, d)
			if c.CachedBlocks() != cached-1 {
				t.Fatalf("after D: %d blocks cached, want %d", c.CachedBlocks(), cached-1)
			}
			c.Remove(4)
			// A's last whole chunk lost a block: B computes it again.
			b := &gpuGen{id: 2, prompt: pb, steps: steps}
			lost := min(commonChunks(pa, pb, chunk), len(pa)/chunk-1) * chunk
			if lost >= len(p)/chunk*chunk {
				t.Fatalf("the eviction does not reach the chunks B shares (%d tokens)", lost)
			}
			openGen(t, c, b, lost)
			runAlone(t, m, c, chunk, b)
			sameGen(t, "B after A's prefix lost a block vs B in a fresh cache", want, b)
			c.Remove(2)
			// E takes every free block: nothing stays cached.
			e := &gpuGen{id: 5, prompt: filler(c.FreeBlocks(), 4000), steps: 1}
			openGen(t, c, e, 0)
			runAlone(t, m, c, chunk, e)
			if c.CachedBlocks() != 0 || c.FreeBlocks() != 0 {
				t.Fatalf("after E: %d blocks cached, %d free", c.CachedBlocks(), c.FreeBlocks())
			}
			c.Remove(5)
			b2 := &gpuGen{id: 2, prompt: pb, steps: steps}
			openGen(t, c, b2, 0)
			runAlone(t, m, c, chunk, b2)
			sameGen(t, "B after every cached block was reused vs B in a fresh cache", want, b2)
			c.Remove(2)
			if err := c.CheckIdle(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestGPUPrefixScheduler serves many requests that share a system prompt
// through engine.Scheduler. One at a time (every batch alone), each
// request's tokens equal its solo run on a fresh cache and it reports the
// cached tokens the canonical chunks of earlier requests give it. Four at
// a time in a small pool (queueing, preemption, eviction of cached
// blocks), every request finishes and the cache is idle afterwards, every
// block free and the books consistent; tokens equal to the solo run are
// counted (batched rows depend on their batch on the GPU: see "Prefix
// sharing" in paged.go).
func TestGPUPrefixScheduler(t *testing.T) {
	m, tok := loadGocoder(t)
	be := gpuBackend(t)
	sys := tok.Encode("// You are a careful Go reviewer. Answer with code only, idiomatic and tested.\n"+
		strings.Repeat("// Prefer small interfaces, wrap errors with context, and keep goroutines owned.\n", 14), true)
	users := []string{"func Sum(xs []int) int {", "type Stack[T any] struct {", "func (s *Server) Close() error {",
		"func parse(line string) (key, value string, err error) {", "// Reverse reverses a slice in place.\nfunc Reverse[T any](s []T) {",
		"func main() {\n\thttp.HandleFunc(\"/\", index)\n", "var ErrNotFound = errors.New(", "func TestSum(t *testing.T) {\n\tfor _, c := range []struct{",
		"select {\ncase <-ctx.Done():", "func (c *Cache) Put(k string, v []byte) {"}
	prompts := make([][]int, len(users))
	for i, u := range users {
		prompts[i] = append(slices.Clone(sys), tok.Encode(u, false)...)
	}
	const chunk, maxTokens = prefixChunk, 48
	// wantCached is what request i finds after requests 0..i-1 ran alone:
	// the longest run of whole chunks before its last token that an
	// earlier prompt holds whole (every chunk of a prompt but its partial
	// last one is canonical).
	wantCached := func(i int) int {
		best := 0
		for j := range i {
			best = max(best, commonChunks(prompts[j], prompts[i], chunk)*chunk)
		}
		return best
	}
	for _, spec := range prefixSpecs[:2] {
		sp := kv.MustParseSpec(spec)
		t.Run(spec, func(t *testing.T) {
			solo := make([][]int, len(prompts))
			for i, p := range prompts {
				c, err := NewPaged(be, m.Config(), sp, prefixOptions(chunk, 0))
				if err != nil {
					t.Fatal(err)
				}
				st, err := engine.Generate(context.Background(), m, tok, c, 0, p, engine.GenerateOptions{MaxTokens: maxTokens, ChunkTokens: chunk, StopIDs: []int{}}, func(string) {})
				c.Close()
				if err != nil {
					t.Fatal(err)
				}
				solo[i] = st.Tokens
			}
			serve := func(maxSeqs, blocks int) ([]engine.Result, engine.SchedulerStats, *Paged) {
				c, err := NewPaged(be, m.Config(), sp, prefixOptions(chunk, blocks))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				s, err := engine.NewScheduler(m, tok, c, engine.SchedulerOptions{MaxSeqs: maxSeqs, PrefillChunk: chunk})
				if err != nil {
					t.Fatal(err)
				}
				streams := make([]*engine.Stream, len(prompts))
				for i, p := range prompts {
					if streams[i], err = s.Submit(context.Background(), engine.Request{Prompt: p, MaxTokens: maxTokens, StopIDs: []int{}}); err != nil {
						t.Fatal(err)
					}
				}
				res := make([]engine.Result, len(prompts))
				for i := range prompts {
					_, res[i] = collect(t, streams[i])
					if res[i].CompletionTokens != maxTokens || res[i].Err != nil {
						t.Errorf("request %d: %d tokens (%s, %v), want %d", i, res[i].CompletionTokens, res[i].FinishReason, res[i].Err, maxTokens)
					}
				}
				st := s.Stats()
				s.Close()
				if err := c.CheckIdle(); err != nil {
					t.Error(err)
				}
				return res, st, c
			}
			// One at a time.
			res, st, c := serve(1, 0)
			total := 0
			for i, r := range res {
				if w := wantCached(i); r.CachedTokens != w {
					t.Errorf("request %d: %d cached prompt tokens, want %d", i, r.CachedTokens, w)
				}
				if !slices.Equal(r.Tokens, solo[i]) {
					t.Errorf("request %d (%d cached tokens): tokens differ from its solo run:\n%v\n%v", i, r.CachedTokens, r.Tokens, solo[i])
				}
				total += r.CachedTokens
			}
			if total == 0 || st.CachedTokens != int64(total) || c.CachedBlocks() == 0 {
				t.Errorf("one at a time: %d cached tokens (stats %d), %d blocks cached at the end", total, st.CachedTokens, c.CachedBlocks())
			}
			// Four at a time, in a pool of one request and a few blocks: the
			// four need the shared blocks and three of their own each.
			blocks := (len(prompts[0])+maxTokens)/32 + 8
			res, st, c = serve(4, blocks)
			same := 0
			for i, r := range res {
				if slices.Equal(r.Tokens, solo[i]) {
					same++
				}
			}
			if st.Preemptions == 0 {
				t.Logf("no preemption in a pool of %d blocks", blocks)
			}
			t.Logf("one at a time: %d cached prompt tokens, every request equal to its solo run; four at a time in %d blocks: %d cached tokens, %d preemptions, %d of %d requests equal to their solo run, %d blocks cached at the end",
				total, blocks, st.CachedTokens, st.Preemptions, same, len(prompts), c.CachedBlocks())
		})
	}
}
