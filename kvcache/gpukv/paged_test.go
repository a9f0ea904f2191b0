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
	const layers = 2
	cfg := &model.Config{Architecture: "test", Layers: layers, Heads: sh.Hq, KVHeads: sh.Hkv, HeadDim: sh.D, MaxPositions: 4096}
	sp := kv.MustParseSpec(spec)
	f, err := sp.Resolve(sh.D)
	if err != nil {
		t.Fatal(err)
	}
	gc, err := NewPaged(be, cfg, sp, kvcache.Options{MaxSeqs: 4, MaxLen: 1024, MaxChunk: 2 * f.Residual})
	if err != nil {
		t.Fatal(err)
	}
	defer gc.Close()
	refs := map[int][]*attn.Cache{} // per sequence, per layer
	qw, kvw := sh.Hq*sh.D, sh.Hkv*sh.D
	for si, step := range gpuScenario(f.Residual) {
		var b model.Batch
		for i, id := range step.ids {
			b.Add(id, gc.Len(id), make([]int32, step.lens[i])...)
		}
		T := len(b.Tokens)
		if err := gc.Begin(&b); err != nil {
			t.Fatalf("step %d: %v", si, err)
		}
		for l := range layers {
			q := make([]float32, T*qw)
			for i := range q {
				q[i] = half.ToFloat32(half.FromFloat32(float32(r.NormFloat64()))) // the GPU attends with fp16 queries
			}
			k, v := kvtest.KeysValues(r, T, sh.Hkv, sh.D)
			var ts [4]backend.Tensor
			for i, w := range []int{qw, kvw, kvw, qw} {
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
			if err := gc.Attend(l, &b, ts[0], ts[1], ts[2], ts[3]); err != nil {
				t.Fatalf("step %d layer %d: %v", si, l, err)
			}
			got := make([]float32, T*qw)
			if err := be.Download(got, ts[3]); err != nil {
				t.Fatal(err)
			}
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
// (kvcache.Options.BatchInvariant)
// with two others: its outputs must be the same bits.
func TestGPUCacheBatchInvariant(t *testing.T) {
	be := gpuBackend(t)
	sh := attn.Shape{Hq: 28, Hkv: 4, D: 128} // group 7
	cfg := &model.Config{Architecture: "test", Layers: 1, Heads: sh.Hq, KVHeads: sh.Hkv, HeadDim: sh.D, MaxPositions: 8192}
	sp := kv.MustParseSpec("int4")
	qw, kvw := sh.Hq*sh.D, sh.Hkv*sh.D
	run := func(others bool) [][]float32 {
		r := rand.New(rand.NewPCG(1, 2))
		gc, err := NewPaged(be, cfg, sp, kvcache.Options{MaxSeqs: 3, MaxLen: 4096, MaxChunk: 512, BatchInvariant: true})
		if err != nil {
			t.Fatal(err)
		}
		defer gc.Close()
		if err := gc.FillRandom(0, 3000, 5); err != nil {
			t.Fatal(err)
		}
		if others {
			if err := gc.FillRandom(1, 700, 6); err != nil {
				t.Fatal(err)
			}
			if err := gc.FillRandom(2, 4000, 7); err != nil {
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
