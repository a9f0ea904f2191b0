package engine

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/bitdecode/bitdecode/internal/tinymodel"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/kvcache"
)

// planeServeSpec is the bw format of the serving tests: blocks of 32
// tokens, a mix of tiers, a short window and period so that re-tiering
// happens within the tiny model's requests.
const planeServeSpec = "bw:h20:m40:l40:w16:s2:r8:blk32"

// TestSchedulerNeedsSizedCache checks that the scheduler refuses an
// unbounded cache: it admits requests by free blocks.
func TestSchedulerNeedsSizedCache(t *testing.T) {
	m, _, be := tiny(t)
	unbounded, err := kvcache.New(be, m.Config(), kv.MustParseSpec(planeServeSpec), kvcache.Options{})
	if err != nil {
		t.Fatal(err)
	}
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
			pc, err := kvcache.NewPlanes(be, m.Config(), kv.MustParseSpec(planeServeSpec), kvcache.Options{MaxSeqs: cfg.maxSeqs, Blocks: cfg.blocks})
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
			if err := pc.CheckIdle(); err != nil {
				t.Error(err)
			}
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
	run := func(tiers string) (kvcache.ReadStats, Result) {
		pc, err := kvcache.NewPlanes(be, m.Config(), kv.MustParseSpec(planeServeSpec), kvcache.Options{MaxSeqs: 2, Blocks: 20})
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
		if err := pc.CheckIdle(); err != nil {
			t.Error(err)
		}
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
	pc, _ := kvcache.NewPlanes(be, m.Config(), kv.MustParseSpec(planeServeSpec), kvcache.Options{MaxSeqs: 2, Blocks: 20})
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
	paged, _ := kvcache.NewPaged(be, m.Config(), kv.MustParseSpec("int4:kc32:v32:res32"), kvcache.Options{MaxSeqs: 2, Blocks: 20})
	ps, _ := NewScheduler(m, tok, paged, SchedulerOptions{})
	defer ps.Close()
	if _, err := ps.Submit(context.Background(), Request{Prompt: prompt, MaxTokens: 1, KVTiers: "h100"}); !errors.Is(err, ErrNoTiers) || !errors.As(err, &te) {
		t.Errorf("KVTiers over an int4 cache: %v", err)
	}
	if ps.Stats().Tiers != nil {
		t.Error("an int4 cache reports tier stats")
	}
}
