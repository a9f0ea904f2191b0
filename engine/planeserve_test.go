package engine

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/bitdecode/bitdecode/internal/tinymodel"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/model"
)

// planeServeSpec is the bw format of the serving tests: blocks of 32
// tokens, a mix of tiers, a short window and period so that re-tiering
// happens within the tiny model's requests.
const planeServeSpec = "bw:h20:m40:l40:w16:s2:r8:blk32"

// checkPlaneIdle checks that a paged bw cache holds nothing: every block
// free, no sequence, an empty tier mix, a consistent allocator.
func checkPlaneIdle(t *testing.T, pc *PlaneCache) {
	t.Helper()
	if pc.FreeBlocks() != pc.TotalBlocks() || pc.Seqs() != 0 {
		t.Errorf("leak: %d of %d blocks free, %d sequences", pc.FreeBlocks(), pc.TotalBlocks(), pc.Seqs())
	}
	if c := pc.TierStats().Cached; c != [kv.NumTiers]int64{} {
		t.Errorf("tier mix %v with nothing cached", c)
	}
	if err := pc.Allocator().Check(); err != nil {
		t.Error(err)
	}
}

// TestPagedPlaneCacheBlocks drives a paged bw cache through the model as
// the scheduler does and checks the block accounting: a block is taken
// when its first token is written, Begin either reserves a batch's blocks
// or fails with ErrOutOfBlocks leaving everything as it was, sequence
// slots run out with ErrNoSlot, Truncate and Remove free blocks together
// with the tier maps, and the memory budget counts planes, tier maps and
// mass.
func TestPagedPlaneCacheBlocks(t *testing.T) {
	m, _, be := tiny(t)
	cfg := m.Config()
	spec := kv.MustParseSpec(planeServeSpec)
	const nr, blocks = 32, 6
	pc, err := NewPagedPlaneCache(be, cfg, spec, PagedOptions{MaxSeqs: 2, Blocks: blocks})
	if err != nil {
		t.Fatal(err)
	}
	if pc.BlockTokens() != nr || pc.TotalBlocks() != blocks || pc.FreeBlocks() != blocks || pc.MaxSeqs() != 2 || pc.ResidualBytes() != 0 {
		t.Fatalf("new cache: %d-token blocks, %d of %d free, %d seqs, residual %d", pc.BlockTokens(), pc.FreeBlocks(), pc.TotalBlocks(), pc.MaxSeqs(), pc.ResidualBytes())
	}
	planes := int64(cfg.Layers * cfg.KVHeads * 4 * nr * cfg.HeadDim)
	if pc.BlockBytes() != planes+int64(cfg.Layers*cfg.KVHeads*nr*5) || pc.PoolBytes() != blocks*planes {
		t.Errorf("block bytes %d (planes %d), pool %d", pc.BlockBytes(), planes, pc.PoolBytes())
	}
	r := rand.New(rand.NewPCG(5, 6))
	forward := func(id, pos, n int) error {
		var b model.Batch
		b.Add(id, pos, randTokens(r, n, tinymodel.Vocab)...)
		_, err := m.Forward(&b, pc)
		return err
	}
	if cached, err := pc.Open(1, []int{1, 2, 3}); err != nil || cached != 0 {
		t.Fatalf("Open: %d, %v", cached, err)
	}
	if _, err := pc.Open(1, nil); err == nil {
		t.Error("Open of an open sequence succeeded")
	}
	if got := pc.BlocksNeeded(1, 40); got != 2 {
		t.Errorf("BlocksNeeded(empty, 40) = %d, want 2", got)
	}
	if err := forward(1, 0, 40); err != nil {
		t.Fatal(err)
	}
	if pc.Len(1) != 40 || pc.FreeBlocks() != blocks-2 {
		t.Fatalf("after 40 tokens: len %d, %d free", pc.Len(1), pc.FreeBlocks())
	}
	for _, tc := range []struct{ n, want int }{{0, 0}, {24, 0}, {25, 1}, {56, 1}, {57, 2}} {
		if got := pc.BlocksNeeded(1, tc.n); got != tc.want {
			t.Errorf("BlocksNeeded(40 tokens, %d) = %d, want %d", tc.n, got, tc.want)
		}
	}
	if got := pc.TierStats().Cached; got[kv.High]+got[kv.Medium]+got[kv.Low] != int64(40*cfg.Layers*cfg.KVHeads) {
		t.Errorf("tier mix %v for 40 tokens", got)
	}

	// Out of blocks: sequence 2 would need 5 blocks, 4 are free. Nothing
	// changes, the sequence Begin opened is closed again.
	st, free, stats := pc.Seqs(), pc.FreeBlocks(), pc.TierStats()
	if err := forward(2, 0, 150); !errors.Is(err, ErrOutOfBlocks) {
		t.Fatalf("150 tokens with %d blocks free: %v", free, err)
	}
	if pc.Seqs() != st || pc.FreeBlocks() != free || pc.Len(1) != 40 || pc.Len(2) != 0 || pc.TierStats() != stats {
		t.Errorf("failed Begin changed the cache: %d seqs, %d free, lens %d %d", pc.Seqs(), pc.FreeBlocks(), pc.Len(1), pc.Len(2))
	}
	if err := pc.Allocator().Check(); err != nil {
		t.Error(err)
	}
	// A second sequence fits; a third finds no slot.
	if err := forward(2, 0, 100); err != nil {
		t.Fatal(err)
	}
	if pc.FreeBlocks() != 0 {
		t.Errorf("%d blocks free, want 0", pc.FreeBlocks())
	}
	if _, err := pc.Open(3, nil); !errors.Is(err, ErrNoSlot) {
		t.Errorf("Open of a third sequence with 2 slots: %v", err)
	}
	// A decode step of sequence 1 fits in its partly filled block.
	if err := forward(1, 40, 1); err != nil {
		t.Fatal(err)
	}
	// Truncate keeps whole and partial blocks, frees the rest, and the
	// sequence continues from there.
	if err := pc.Truncate(2, 65); err != nil {
		t.Fatal(err)
	}
	if pc.Len(2) != 65 || pc.FreeBlocks() != 1 || len(pc.Tiers(2, 1, 0)) != 65 {
		t.Errorf("truncate to 65: len %d, %d free, %d tiers", pc.Len(2), pc.FreeBlocks(), len(pc.Tiers(2, 1, 0)))
	}
	if err := pc.Truncate(2, 64); err != nil {
		t.Fatal(err)
	}
	if pc.FreeBlocks() != 2 {
		t.Errorf("truncate to 64: %d free, want 2", pc.FreeBlocks())
	}
	if err := pc.Truncate(2, 65); err == nil {
		t.Error("truncate beyond the length succeeded")
	}
	if err := forward(2, 64, 10); err != nil {
		t.Fatal(err)
	}
	if pc.Len(2) != 74 || pc.FreeBlocks() != 1 {
		t.Errorf("after continuing: len %d, %d free", pc.Len(2), pc.FreeBlocks())
	}
	want := int64((41 + 74) * cfg.Layers * cfg.KVHeads)
	var held int64
	for _, n := range pc.TierStats().Cached {
		held += n
	}
	if held != want {
		t.Errorf("tier mix holds %d entries, want %d", held, want)
	}
	pc.Remove(1)
	pc.Remove(2)
	pc.Remove(2)
	checkPlaneIdle(t, pc)

	// Sizing from memory: the budget is in BlockBytes (planes plus tier
	// maps and mass).
	bb := pc.BlockBytes()
	sized, err := NewPagedPlaneCache(be, cfg, spec, PagedOptions{MaxSeqs: 4, MemoryBytes: 10*bb + bb - 1})
	if err != nil || sized.TotalBlocks() != 10 {
		t.Errorf("memory for 10.99 blocks: %v blocks, %v", sized.TotalBlocks(), err)
	}
	if _, err := NewPagedPlaneCache(be, cfg, spec, PagedOptions{MaxSeqs: 4, MemoryBytes: bb - 1}); err == nil {
		t.Error("memory for no block accepted")
	}
	if _, err := NewPagedPlaneCache(be, cfg, kv.MustParseSpec("int4"), PagedOptions{MaxSeqs: 4, Blocks: 4}); err == nil {
		t.Error("int4 accepted as a bw cache")
	}
	// The scheduler needs a sized cache.
	unbounded, _ := NewPlaneCache(be, cfg, spec)
	if _, err := NewScheduler(m, nil, unbounded, SchedulerOptions{}); err == nil {
		t.Error("scheduler over an unbounded cache")
	}
}

// TestSchedulerPlaneMatchesSolo is TestSchedulerMatchesSolo over a paged
// bw cache with tiers, re-tiering every 8 tokens: each request's greedy
// text equals its solo run through Generate and an unbounded PlaneCache
// (the same prefill chunks, so the same re-tier points), with ample
// memory and with a pool so small that the scheduler queues and preempts;
// afterwards every block is free and the tier mix is empty.
func TestSchedulerPlaneMatchesSolo(t *testing.T) {
	m, tok, be := tiny(t)
	const chunk = 64
	r := rand.New(rand.NewPCG(21, 22))
	common := make([]int, 70)
	for i := range common {
		common[i] = r.IntN(256)
	}
	n := 16
	if testing.Short() {
		n = 8
	}
	cases := tinyCases(r, n, common)
	soloReference(t, be, m, tok, planeServeSpec, chunk, cases)
	for _, cfg := range []struct {
		name            string
		blocks, maxSeqs int
		wantPreempt     bool
	}{
		{"ample", 200, 16, false},
		{"tight", 9, 8, true},
	} {
		t.Run(cfg.name, func(t *testing.T) {
			pc, err := NewPagedPlaneCache(be, m.Config(), kv.MustParseSpec(planeServeSpec), PagedOptions{MaxSeqs: cfg.maxSeqs, Blocks: cfg.blocks})
			if err != nil {
				t.Fatal(err)
			}
			s, err := NewScheduler(m, tok, pc, SchedulerOptions{PrefillChunk: chunk})
			if err != nil {
				t.Fatal(err)
			}
			if want := min(cfg.blocks*32+1, m.Config().MaxPositions); s.ContextLimit() != want {
				t.Errorf("context limit %d, want %d (a bw sequence fills a block from its first token)", s.ContextLimit(), want)
			}
			var wg sync.WaitGroup
			got := make([]string, len(cases))
			res := make([]Result, len(cases))
			for i, c := range cases {
				st, err := s.Submit(context.Background(), Request{Prompt: c.prompt, MaxTokens: c.max})
				if err != nil {
					t.Fatal(err)
				}
				wg.Go(func() { got[i], res[i] = collect(t, st) })
			}
			wg.Wait()
			s.Close()
			for i, c := range cases {
				if got[i] != c.want || res[i].CompletionTokens != c.wantN {
					t.Errorf("request %d (%d prompt tokens, preempted %d times): %d tokens %q, solo %d tokens %q",
						i, len(c.prompt), res[i].Preemptions, res[i].CompletionTokens, got[i], c.wantN, c.want)
				}
				if res[i].FinishReason != FinishStop && res[i].FinishReason != FinishLength {
					t.Errorf("request %d finished with %q (%v)", i, res[i].FinishReason, res[i].Err)
				}
			}
			st := s.Stats()
			t.Logf("%s: %d steps, %d preemptions, read %.1f%% of fp16's bytes", cfg.name, st.Steps, st.Preemptions, 100*pc.ReadStats().Traffic())
			if cfg.wantPreempt && st.Preemptions == 0 {
				t.Error("the tight pool never preempted")
			}
			if !cfg.wantPreempt && st.Preemptions != 0 {
				t.Errorf("ample pool: %d preemptions", st.Preemptions)
			}
			if st.Tiers == nil || st.Tiers.Read != pc.ReadStats() || st.Tiers.PerToken != m.Config().Layers*m.Config().KVHeads {
				t.Errorf("scheduler stats: tiers %+v, cache read %+v", st.Tiers, pc.ReadStats())
			}
			if tr := pc.ReadStats().Traffic(); tr <= 0.25 || tr >= 1 {
				t.Errorf("traffic %.3f of fp16, want within (1/4, 1) for h20:m40:l40", tr)
			}
			checkPlaneIdle(t, pc)
		})
	}
}

// TestSchedulerKVTiers runs the same greedy request under different
// Request.KVTiers over caches of the same spec: h100 reads every plane
// (exactly fp16's bytes), l100:w0:s0 a quarter of them (every token at 4
// bits), and the cache's own policy in between. Invalid tiers, and tiers
// over a cache without them, are refused at Submit.
func TestSchedulerKVTiers(t *testing.T) {
	m, tok, be := tiny(t)
	prompt := []int{tinymodel.BOS}
	r := rand.New(rand.NewPCG(7, 8))
	for range 80 {
		prompt = append(prompt, r.IntN(256))
	}
	run := func(tiers string) (ReadStats, Result) {
		pc, err := NewPagedPlaneCache(be, m.Config(), kv.MustParseSpec(planeServeSpec), PagedOptions{MaxSeqs: 2, Blocks: 20})
		if err != nil {
			t.Fatal(err)
		}
		s, err := NewScheduler(m, tok, pc, SchedulerOptions{PrefillChunk: 64})
		if err != nil {
			t.Fatal(err)
		}
		st, err := s.Submit(context.Background(), Request{Prompt: prompt, MaxTokens: 40, StopIDs: []int{}, KVTiers: tiers})
		if err != nil {
			t.Fatal(err)
		}
		_, res := collect(t, st)
		s.Close()
		checkPlaneIdle(t, pc)
		return pc.ReadStats(), res
	}
	high, hres := run("h100")
	low, lres := run("bw:l100:w0:s0")
	own, _ := run("")
	for _, res := range []Result{hres, lres} {
		if res.CompletionTokens != 40 || res.FinishReason != FinishLength {
			t.Fatalf("result %+v", res)
		}
	}
	t.Logf("plane bytes read: h100 %d, l100 %d, own policy %d (fp16 %d)", high.PlaneBytes, low.PlaneBytes, own.PlaneBytes, high.FP16Bytes)
	if high.FP16Bytes != low.FP16Bytes || high.FP16Bytes != own.FP16Bytes {
		t.Fatalf("fp16 bytes differ: %d %d %d", high.FP16Bytes, low.FP16Bytes, own.FP16Bytes)
	}
	if high.PlaneBytes != high.FP16Bytes || high.Tokens[kv.Medium]+high.Tokens[kv.Low] != 0 {
		t.Errorf("h100: read %+v", high)
	}
	if low.PlaneBytes*4 != low.FP16Bytes || low.Tokens[kv.High]+low.Tokens[kv.Medium] != 0 {
		t.Errorf("l100:w0:s0: read %+v", low)
	}
	if !(low.PlaneBytes < own.PlaneBytes && own.PlaneBytes < high.PlaneBytes) {
		t.Errorf("plane bytes: l100 %d, own %d, h100 %d: want increasing", low.PlaneBytes, own.PlaneBytes, high.PlaneBytes)
	}

	// Refusals.
	pc, _ := NewPagedPlaneCache(be, m.Config(), kv.MustParseSpec(planeServeSpec), PagedOptions{MaxSeqs: 2, Blocks: 20})
	s, _ := NewScheduler(m, tok, pc, SchedulerOptions{})
	defer s.Close()
	var te *TiersError
	var se *kv.SpecError
	for _, bad := range []string{"h20:m40", "bf16", "blk64", "a8=3", "x"} {
		_, err := s.Submit(context.Background(), Request{Prompt: prompt, MaxTokens: 1, KVTiers: bad})
		if !errors.As(err, &te) || !errors.As(err, &se) || te.KVTiers != bad {
			t.Errorf("KVTiers %q: %v", bad, err)
		}
	}
	if p, err := s.ParseKVTiers("m100"); err != nil || p.PolicyString() != "h0:m100:l0:w16:s2:r8" {
		t.Errorf("ParseKVTiers(m100) = %s, %v", p.PolicyString(), err)
	}
	paged, _ := NewPagedCache(be, m.Config(), kv.MustParseSpec("int4:kc32:v32:res32"), PagedOptions{MaxSeqs: 2, Blocks: 20})
	ps, _ := NewScheduler(m, tok, paged, SchedulerOptions{})
	defer ps.Close()
	if _, err := ps.Submit(context.Background(), Request{Prompt: prompt, MaxTokens: 1, KVTiers: "h100"}); !errors.Is(err, ErrNoTiers) || !errors.As(err, &te) {
		t.Errorf("KVTiers over an int4 cache: %v", err)
	}
	if ps.Stats().Tiers != nil {
		t.Error("an int4 cache reports tier stats")
	}
}
