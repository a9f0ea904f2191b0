package gpukv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bitdecode/bitdecode/backend/cpu"
	"github.com/bitdecode/bitdecode/engine"
	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/internal/testmodel"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/kvcache"
	"github.com/bitdecode/bitdecode/model"
	"github.com/bitdecode/bitdecode/tokenizer"
)

// recountMix recomputes a planeBook's tier mix from its sequences' counts
// and checks it, the counts (every token in one tier) and the block tables
// against the books.
func recountMix(t *testing.T, what string, k *planeBook) {
	t.Helper()
	var mix [kv.NumTiers]int64
	held := 0
	for id, g := range k.seqs {
		for l := range g.counts {
			for h := range g.counts[l] {
				n := g.counts[l][h]
				if n[kv.High]+n[kv.Medium]+n[kv.Low]+n[kv.Evicted] != g.n {
					t.Fatalf("%s: sequence %d layer %d head %d: counts %v for %d tokens", what, id, l, h, n, g.n)
				}
				for i, c := range n {
					mix[i] += int64(c)
				}
			}
		}
		if len(g.blocks) != k.blocksFor(g.n) {
			t.Fatalf("%s: sequence %d holds %d blocks for %d tokens", what, id, len(g.blocks), g.n)
		}
		held += len(g.blocks)
	}
	if mix != k.mix {
		t.Fatalf("%s: tier mix %v, recounted %v", what, k.mix, mix)
	}
	if held+len(k.alloc.freeBlocks) != k.alloc.blocks || len(k.seqs)+len(k.alloc.freeSlots) != k.alloc.slots {
		t.Fatalf("%s: %d blocks held + %d free of %d; %d sequences + %d free slots of %d", what, held, len(k.alloc.freeBlocks), k.alloc.blocks,
			len(k.seqs), len(k.alloc.freeSlots), k.alloc.slots)
	}
}

// TestPlaneBook drives the GPU bit-plane cache's host-side books without a
// device, as the scheduler does: Open with a slot (ErrNoSlot when full),
// per-sequence tier policies (new tokens take the sequence's NewTier,
// re-tiers its shares and period), Begin's all-or-nothing check
// (ErrOutOfBlocks leaves everything unchanged), Truncate to 0 and to the
// length only, Remove; the tier mix stays in step with the tier maps and
// the cache is idle at the end.
func TestPlaneBook(t *testing.T) {
	sp := kv.MustParseSpec("bw:h20:m40:l40:w4:s1:r4:blk32").Planes
	const layers, hkv, nr = 2, 2, 32
	k := newPlaneBook(sp, 4, 2, layers, hkv, nr)
	g1, err := k.open(1)
	if err != nil || !g1.fresh || g1.policy != sp {
		t.Fatalf("open(1) = %+v, %v", g1, err)
	}
	if _, err := k.open(1); err == nil {
		t.Error("open(1) twice succeeded")
	}
	if _, err := k.open(2); err != nil {
		t.Fatal(err)
	}
	if _, err := k.open(3); !errors.Is(err, kvcache.ErrNoSlot) {
		t.Errorf("open(3) with 2 slots: %v, want ErrNoSlot", err)
	}
	low, err := kv.ParsePlanePolicy("l100:w0:s0", sp)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.setPolicy(1, low); err != nil {
		t.Fatal(err)
	}
	if g1.policy.PolicyString() != "h0:m0:l100:w0:s0:r4" || g1.policy.Adj8 != sp.Adj8 {
		t.Errorf("policy of sequence 1: %+v", g1.policy)
	}
	bad := []kv.PlaneSpec{{High: 20, Medium: 40, Period: 4}, {High: 100, Period: 0}, {High: 100, Window: -1, Period: 4},
		{High: 120, Low: -20, Period: 4}, {High: 100, Sinks: kv.MaxPlaneTokens + 1, Period: 4}}
	for _, p := range bad {
		if err := k.setPolicy(1, p); err == nil {
			t.Errorf("setPolicy(%s) accepted", p.PolicyString())
		}
	}
	if err := k.setPolicy(9, low); err == nil {
		t.Error("setPolicy of a sequence not open succeeded")
	}
	if g1.policy != low {
		t.Errorf("a refused policy changed sequence 1's: %+v", g1.policy)
	}

	// A batch starts both: 40 tokens (2 blocks) and 10 (1 block).
	var b model.Batch
	b.Add(1, 0, make([]int32, 40)...)
	b.Add(2, 0, make([]int32, 10)...)
	if err := k.check(&b, 64, 256); err != nil {
		t.Fatal(err)
	}
	seqs, fresh := k.reserve(&b)
	if len(seqs) != 2 || seqs[0] != g1 || len(fresh) != 2 {
		t.Fatalf("reserve: %d sequences, fresh slots %v", len(seqs), fresh)
	}
	recountMix(t, "first batch", &k)
	if want := [kv.NumTiers]int64{kv.High: 10 * layers * hkv, kv.Low: 40 * layers * hkv}; k.mix != want {
		t.Errorf("mix %v, want %v (sequence 1 all Low, sequence 2 High)", k.mix, want)
	}
	if got := k.blocksNeeded(1, 25); got != 1 || k.blocksNeeded(-1, 65) != 3 {
		t.Errorf("blocksNeeded(1, 25) = %d, want 1; blocksNeeded(-1, 65) = %d, want 3", got, k.blocksNeeded(-1, 65))
	}

	// Out of blocks: nothing changes.
	var b2 model.Batch
	b2.Add(1, 40, make([]int32, 30)...)
	b2.Add(2, 10, make([]int32, 60)...)
	mix := k.mix
	if err := k.check(&b2, 64, 256); !errors.Is(err, kvcache.ErrOutOfBlocks) {
		t.Errorf("a batch of 3 blocks with 1 free: %v, want ErrOutOfBlocks", err)
	}
	if k.len(1) != 40 || k.len(2) != 10 || len(k.alloc.freeBlocks) != 1 || k.mix != mix {
		t.Errorf("a refused batch changed the books: lengths %d %d, %d blocks free", k.len(1), k.len(2), len(k.alloc.freeBlocks))
	}
	for _, tc := range []struct {
		id, pos, n int
	}{{1, 39, 1}, {2, 10, 65}, {1, 40, 250}, {5, 3, 1}} {
		var bb model.Batch
		bb.Add(tc.id, tc.pos, make([]int32, tc.n)...)
		if err := k.check(&bb, 64, 256); err == nil {
			t.Errorf("check(sequence %d at %d + %d tokens) passed", tc.id, tc.pos, tc.n)
		}
	}

	// Re-tier: sequence 2 after its period, on increasing mass.
	var b3 model.Batch
	b3.Add(2, 10, 0)
	seqs, fresh = k.reserve(&b3)
	g2 := seqs[0]
	if len(fresh) != 0 {
		t.Errorf("fresh slots %v for a running sequence", fresh)
	}
	if jobs := k.retierJobs(&b3); len(jobs) != 0 {
		t.Errorf("%d re-tier jobs before any period elapsed", len(jobs))
	}
	g2.since[1], g1.since[0] = 4, 4
	jobs := k.retierJobs(&b3)
	if len(jobs) != 1 || jobs[0].g != g2 || jobs[0].layer != 1 {
		t.Fatalf("re-tier jobs %+v, want sequence 2 layer 1", jobs)
	}
	j := k.retierLayer(g2, 1)
	recountMix(t, "after a re-tier", &k)
	// 11 tokens: want e0 l4 m4; sink 0 and window 7..10 are High, the
	// candidates 1..6 take 4 Low and 2 Medium.
	if got := g2.counts[1][0]; got != [kv.NumTiers]int{kv.High: 5, kv.Medium: 2, kv.Low: 4} {
		t.Errorf("sequence 2 layer 1 after a re-tier: %v", got)
	}
	if want := (kernels.PlanesRetierJob{SL: g2.slot*layers + 1, N: 11, Sinks: 1, Win: 7, KE: 0, KL: 4, KM: 6, Last: kv.High}); j != want || g2.since[1] != 0 {
		t.Errorf("re-tier job %+v, want %+v; since %d", j, want, g2.since[1])
	}
	if got := g2.counts[0][0]; got != [kv.NumTiers]int{kv.High: 11} {
		t.Errorf("sequence 2 layer 0, not re-tiered: %v", got)
	}

	// Truncate: only 0 and the length.
	if err := k.truncate(1, 5); err == nil {
		t.Error("truncate(1, 5) succeeded")
	}
	if err := k.truncate(1, 40); err != nil || k.len(1) != 40 {
		t.Errorf("truncate(1, 40): %v, length %d", err, k.len(1))
	}
	if err := k.truncate(7, 0); err != nil {
		t.Errorf("truncate of an unknown sequence to 0: %v", err)
	}
	if err := k.truncate(7, 3); err == nil {
		t.Error("truncate of an unknown sequence to 3 succeeded")
	}
	if err := k.truncate(1, 0); err != nil || k.len(1) != 0 || !g1.fresh || g1.policy != low || g1.since[0] != 0 {
		t.Errorf("truncate(1, 0): %v, length %d, fresh %v, policy %s", err, k.len(1), g1.fresh, g1.policy.PolicyString())
	}
	recountMix(t, "after truncate", &k)
	var b4 model.Batch
	b4.Add(1, 0, make([]int32, 3)...)
	if err := k.check(&b4, 64, 256); err != nil {
		t.Fatal(err)
	}
	if _, fresh = k.reserve(&b4); !slices.Equal(fresh, []int{g1.slot}) {
		t.Errorf("after truncate(1, 0), fresh slots %v, want [%d]", fresh, g1.slot)
	}
	if got := g1.counts[0][1]; got != [kv.NumTiers]int{kv.Low: 3} || g1.last != kv.Low {
		t.Errorf("sequence 1 keeps its policy after truncate: %v", got)
	}
	recountMix(t, "after refilling", &k)
	if err := k.checkIdle(); err == nil {
		t.Error("checkIdle with 2 sequences held")
	}
	k.remove(1)
	k.remove(2)
	k.remove(2)
	recountMix(t, "after remove", &k)
	if err := k.checkIdle(); err != nil {
		t.Error(err)
	}
	if st := k.tierStats(kvcache.ReadStats{}); st.PerToken != layers*hkv || st.Cached != ([kv.NumTiers]int64{}) {
		t.Errorf("tier stats when idle: %+v", st)
	}
}

// planeServeSpec is the bw format of the serving tests on the GPU: the
// default blocks (64 tokens, as TestGPUPlaneCacheGolden), an H/M/L mix with
// a short window and period so that re-tiering happens within a request.
const planeServeSpec = "bw:h20:m40:l40:w8:s2:r8"

// planeServeChunk and planeServeTokens are the prefill chunk and the
// tokens generated per request of the serving tests (the golden prompts'
// greedy length).
const planeServeChunk, planeServeTokens = 64, 48

// planeServeReq is one request of the bw serving tests: a prompt and its
// kv_tiers ("" for the cache's policy).
type planeServeReq struct {
	prompt []int
	tiers  string
}

// planeServeRequests returns the requests of the serving tests: the three
// golden.json prompts at h100 (all High: fp16's values), at the cache's
// mix and at uniform 4 and 8 bits, and longer prompts (about 80 to 150
// tokens) at the cache's mix and with evictions; it also returns each
// golden prompt's greedy ids.
func planeServeRequests(t *testing.T, dir string, tok *tokenizer.Tokenizer) ([]planeServeReq, [][]int) {
	t.Helper()
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
	if len(g.Prompts) < 3 {
		t.Fatalf("golden.json has %d prompts, want 3", len(g.Prompts))
	}
	gold := func(i int) []int { return g.Prompts[i].IDs }
	long := func(s string, n int) []int { return tok.Encode(strings.Repeat(s, n), true) }
	reqs := []planeServeReq{
		{gold(0), "h100"},
		{long("func (s *Server) handle(w http.ResponseWriter, r *http.Request) {\n\tif r.Method != http.MethodGet {\n\t\thttp.Error(w, \"bad method\", 405)\n\t\treturn\n\t}\n}\n", 3), ""},
		{gold(1), "h100"},
		{gold(2), "h100"},
		{gold(0), "l100:w0:s0"},
		{long("// Package cache keeps recently used values in memory.\ntype Cache struct {\n\tmu sync.Mutex\n\titems map[string][]byte\n}\n", 3), "h30:m30:l20:e20:w4:s1:r4"},
		{gold(1), ""},
		{gold(2), "m100:w0:s0"},
		{long("for i, v := range values {\n\tif v < 0 {\n\t\tcontinue\n\t}\n\tsum += v * weights[i]\n}\n", 4), ""},
	}
	greedy := make([][]int, 3)
	for i := range greedy {
		greedy[i] = g.Prompts[i].Greedy
		if len(greedy[i]) < planeServeTokens {
			t.Fatalf("golden.json prompt %d has %d greedy ids, want %d", i, len(greedy[i]), planeServeTokens)
		}
	}
	return reqs, greedy
}

// tierChecker is a bw cache as the scheduler drives it, checking after
// every Begin that each sequence of the batch holds tiers its own policy
// allows: at most ⌊L·share/100⌋ tokens Medium, Low and Evicted (a re-tier
// meets the shares at its length, newer tokens are added High), and every
// token in the one tier of a uniform policy (h100, or mP/lP with no window
// and no sinks). It notes the policies it saw (PolicyString).
type tierChecker struct {
	kvcache.Cache
	planes *Planes // the GPU cache (nil: no checks)
	seen   map[string]bool
	err    error
}

// Begin implements model.BatchStarter.
func (c *tierChecker) Begin(b *model.Batch) error {
	if err := c.Cache.Begin(b); err != nil || c.planes == nil {
		return err
	}
	for _, s := range b.Seqs {
		g := c.planes.book.seqs[s.ID]
		p := g.policy
		c.seen[p.PolicyString()] = true
		share := [kv.NumTiers]int{kv.High: p.High, kv.Medium: p.Medium, kv.Low: p.Low, kv.Evicted: p.Evicted}
		for l := range g.counts {
			for h := range g.counts[l] {
				n := tierCounts(c.planes.Tiers(s.ID, l, h)) // the device's index
				if n != g.counts[l][h] && c.err == nil {
					c.err = fmt.Errorf("sequence %d layer %d head %d: device index counts %v, books %v", s.ID, l, h, n, g.counts[l][h])
				}
				for tier, pct := range share {
					uniform := pct == 100 && (tier == int(kv.High) || p.Window == 0 && p.Sinks == 0)
					if tier != int(kv.High) && n[tier] > g.n*pct/100 || uniform && n[tier] != g.n {
						if c.err == nil {
							c.err = fmt.Errorf("sequence %d (policy %s, %d tokens) layer %d head %d: tier counts %v", s.ID, p.PolicyString(), g.n, l, h, n)
						}
					}
				}
			}
		}
	}
	return nil
}

// servePlanes serves reqs through an engine.Scheduler of maxSeqs
// sequences over cache c and returns their results and the scheduler's
// stats; every request must finish with planeServeTokens tokens.
func servePlanes(t *testing.T, m model.Model, tok *tokenizer.Tokenizer, c kvcache.Cache, maxSeqs int, reqs []planeServeReq) ([]engine.Result, engine.SchedulerStats) {
	t.Helper()
	s, err := engine.NewScheduler(m, tok, c, engine.SchedulerOptions{MaxSeqs: maxSeqs, PrefillChunk: planeServeChunk})
	if err != nil {
		t.Fatal(err)
	}
	streams := make([]*engine.Stream, len(reqs))
	for i, r := range reqs {
		if streams[i], err = s.Submit(context.Background(), engine.Request{Prompt: r.prompt, MaxTokens: planeServeTokens, StopIDs: []int{}, KVTiers: r.tiers}); err != nil {
			s.Close()
			t.Fatal(err)
		}
	}
	res := make([]engine.Result, len(reqs))
	for i := range reqs {
		_, res[i] = collect(t, streams[i])
		if res[i].CompletionTokens != planeServeTokens || res[i].Err != nil {
			t.Errorf("request %d (kv_tiers %q): %d tokens (%s, %v), want %d", i, reqs[i].tiers, res[i].CompletionTokens, res[i].FinishReason, res[i].Err, planeServeTokens)
		}
	}
	st := s.Stats()
	s.Close()
	return res, st
}

// planeServeCheck is what the serving test checks of one request's reads
// alone: the tiers its policy reads and the traffic they make.
func planeServeCheck(tiers string, rs kvcache.ReadStats) error {
	n := rs.Tokens
	switch tiers {
	case "h100":
		if rs.PlaneBytes != rs.FP16Bytes || n[kv.Medium]+n[kv.Low]+n[kv.Evicted] != 0 {
			return fmt.Errorf("h100 read %+v, want every token at 16 bits", rs)
		}
	case "m100:w0:s0":
		if rs.PlaneBytes*2 != rs.FP16Bytes || n[kv.High]+n[kv.Low]+n[kv.Evicted] != 0 {
			return fmt.Errorf("m100:w0:s0 read %+v, want every token at 8 bits", rs)
		}
	case "l100:w0:s0":
		if rs.PlaneBytes*4 != rs.FP16Bytes || n[kv.High]+n[kv.Medium]+n[kv.Evicted] != 0 {
			return fmt.Errorf("l100:w0:s0 read %+v, want every token at 4 bits", rs)
		}
	case "h30:m30:l20:e20:w4:s1:r4":
		if n[kv.Evicted] == 0 || n[kv.Medium] == 0 || n[kv.Low] == 0 || rs.Traffic() >= 1 {
			return fmt.Errorf("%s read %+v, want Medium, Low and Evicted tokens", tiers, rs)
		}
	case "":
		if n[kv.Medium] == 0 || n[kv.Low] == 0 || n[kv.Evicted] != 0 || rs.Traffic() >= 1 {
			return fmt.Errorf("the cache's h20:m40:l40 read %+v, want Medium and Low tokens, none evicted", rs)
		}
	default:
		return fmt.Errorf("no check for kv_tiers %q", tiers)
	}
	return nil
}

// planeServeBlocks is the pool of the concurrent run: with 4 sequences
// at a time, too few blocks for the running requests to reach their
// lengths, so the scheduler queues and preempts (TestPlaneServeScenarioCPU
// checks that it does, with the CPU cache's block accounting, which is the
// GPU cache's).
const planeServeBlocks, planeServeSeqs = 5, 4

// TestGPUPlaneScheduler serves gocoder-23m through engine.Scheduler over
// the GPU bit-plane cache, requests with their own tier policy (kv_tiers)
// beside requests with the cache's. One at a time: every request reads
// the tiers its policy gives (h100 every token at 16 bits, m100/l100 at 8
// or 4, the mixes Medium and Low), and the greedy tokens of the h100
// requests (golden.json's prompts) equal the fp16 GPU cache's for the
// same prompt (the planes kernel reads the same fp16 values; both follow
// golden.json, see TestGPUCacheGolden and TestGPUPlaneCacheGolden). Four
// at a time in a pool too small for them: every request finishes, the
// scheduler preempts, every sequence's tiers obey its own policy after
// every batch, each request's policy is seen, and afterwards no block,
// slot or tier entry is held. Batched tokens are compared with the solo
// run and counted, not asserted: on the GPU a batch's projections depend
// on its rows (cuBLASLt above kernels.GEMVMaxRows), so greedy texts may
// part after a near-tie (as in TestGPUScheduler).
func TestGPUPlaneScheduler(t *testing.T) {
	m, tok := loadGocoder(t)
	be := gpuBackend(t)
	reqs, _ := planeServeRequests(t, testmodel.Dir(t), tok)
	sp := kv.MustParseSpec(planeServeSpec)
	opts := func(blocks int) kvcache.Options {
		return kvcache.Options{MaxSeqs: planeServeSeqs, MaxLen: 512, MaxChunk: planeServeChunk, Blocks: blocks}
	}
	fp16 := map[int][]int{} // golden prompt's first token position in reqs -> fp16 tokens
	for i, r := range reqs {
		if r.tiers != "h100" {
			continue
		}
		c, err := NewPaged(be, m.Config(), kv.MustParseSpec("fp16"), kvcache.Options{MaxSeqs: 1, MaxLen: 512, MaxChunk: planeServeChunk})
		if err != nil {
			t.Fatal(err)
		}
		st, err := engine.Generate(context.Background(), m, tok, c, 0, r.prompt, engine.GenerateOptions{MaxTokens: planeServeTokens, ChunkTokens: planeServeChunk, StopIDs: []int{}}, func(string) {})
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		fp16[i] = st.Tokens
	}

	// One at a time.
	c, err := NewPlanes(be, m.Config(), sp, opts(0))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	solo := make([][]int, len(reqs))
	for i, r := range reqs {
		before := c.ReadStats()
		chk := &tierChecker{Cache: c, planes: c, seen: map[string]bool{}}
		res, _ := servePlanes(t, m, tok, chk, 1, []planeServeReq{r})
		if chk.err != nil {
			t.Errorf("request %d alone: %v", i, chk.err)
		}
		solo[i] = res[0].Tokens
		rs := c.ReadStats()
		rs.PlaneBytes -= before.PlaneBytes
		rs.IndexBytes -= before.IndexBytes
		rs.FP16Bytes -= before.FP16Bytes
		for j := range rs.Tokens {
			rs.Tokens[j] -= before.Tokens[j]
		}
		if err := planeServeCheck(r.tiers, rs); err != nil {
			t.Errorf("request %d alone: %v", i, err)
		}
		if want, ok := fp16[i]; ok && !slices.Equal(solo[i], want) {
			t.Errorf("request %d alone at h100: tokens differ from the fp16 GPU cache's:\n%v\n%v", i, solo[i], want)
		}
		if err := c.CheckIdle(); err != nil {
			t.Fatalf("after request %d alone: %v", i, err)
		}
	}

	// Four at a time in a small pool.
	bc, err := NewPlanes(be, m.Config(), sp, opts(planeServeBlocks))
	if err != nil {
		t.Fatal(err)
	}
	defer bc.Close()
	chk := &tierChecker{Cache: bc, planes: bc, seen: map[string]bool{}}
	res, st := servePlanes(t, m, tok, chk, planeServeSeqs, reqs)
	if chk.err != nil {
		t.Error(chk.err)
	}
	for i, r := range reqs {
		want := sp.Planes
		if r.tiers != "" {
			if want, err = kv.ParsePlanePolicy(r.tiers, sp.Planes); err != nil {
				t.Fatal(err)
			}
		}
		if !chk.seen[want.PolicyString()] {
			t.Errorf("request %d: no sequence ran with its policy %s (saw %v)", i, want.PolicyString(), chk.seen)
		}
	}
	if st.Preemptions == 0 {
		t.Errorf("no preemption with %d sequences in %d blocks", planeServeSeqs, planeServeBlocks)
	}
	ts, ok := bc.TierStats()
	if !ok || st.Tiers == nil || st.Tiers.PerToken != m.Config().Layers*m.Config().KVHeads || ts.Cached != ([kv.NumTiers]int64{}) {
		t.Errorf("tier stats: cache %+v, scheduler %+v", ts, st.Tiers)
	}
	for tier, n := range ts.Read.Tokens {
		if n == 0 {
			t.Errorf("no token read at tier %d over the batched run: %+v", tier, ts.Read)
		}
	}
	if err := bc.CheckIdle(); err != nil {
		t.Error(err)
	}
	same := 0
	for i, r := range res {
		if slices.Equal(r.Tokens, solo[i]) {
			same++
		}
	}
	t.Logf("%d requests, %d at a time in %d blocks: %d steps, %d preemptions, %d of %d equal to their solo run; read %.1f%% of fp16's bytes",
		len(reqs), planeServeSeqs, planeServeBlocks, st.Steps, st.Preemptions, same, len(reqs), 100*ts.Read.Traffic())
}

// TestPlaneServeScenarioCPU runs TestGPUPlaneScheduler's requests through
// the scheduler over the CPU bit-plane cache (the same blocks of 64
// tokens and the same block accounting) and checks what the GPU test
// assumes of its scenario without a GPU: each request alone reads the
// tiers its policy gives, and the batched run in the same small pool
// preempts and ends idle.
func TestPlaneServeScenarioCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("generates 18 requests of gocoder-23m on the CPU")
	}
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
	reqs, greedy := planeServeRequests(t, dir, tok)
	sp := kv.MustParseSpec(planeServeSpec)
	c, err := kvcache.NewPlanes(be, m.Config(), sp, kvcache.Options{MaxSeqs: planeServeSeqs, Blocks: 64})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range reqs {
		before := c.ReadStats()
		res, _ := servePlanes(t, m, tok, c, 1, []planeServeReq{r})
		rs := c.ReadStats()
		rs.PlaneBytes -= before.PlaneBytes
		rs.IndexBytes -= before.IndexBytes
		rs.FP16Bytes -= before.FP16Bytes
		for j := range rs.Tokens {
			rs.Tokens[j] -= before.Tokens[j]
		}
		if err := planeServeCheck(r.tiers, rs); err != nil {
			t.Errorf("request %d alone: %v", i, err)
		}
		if g, ok := map[int]int{0: 0, 2: 1, 3: 2}[i]; ok {
			t.Logf("request %d (golden prompt %d) at h100 on the CPU: greedy tokens equal golden.json's: %v", i, g, slices.Equal(res[0].Tokens, greedy[g][:planeServeTokens]))
		}
		t.Logf("request %d: %d prompt tokens, kv_tiers %q", i, len(r.prompt), r.tiers)
	}
	bc, err := kvcache.NewPlanes(be, m.Config(), sp, kvcache.Options{MaxSeqs: planeServeSeqs, Blocks: planeServeBlocks})
	if err != nil {
		t.Fatal(err)
	}
	_, st := servePlanes(t, m, tok, bc, planeServeSeqs, reqs)
	if st.Preemptions == 0 {
		t.Errorf("no preemption with %d sequences in %d blocks", planeServeSeqs, planeServeBlocks)
	}
	if err := bc.CheckIdle(); err != nil {
		t.Error(err)
	}
	t.Logf("%d at a time in %d blocks: %d steps, %d preemptions", planeServeSeqs, planeServeBlocks, st.Steps, st.Preemptions)
}

// TestPlaneBookRelayout checks the books' answer to a policy change that
// changes the tier new tokens get while a sequence holds tokens: every
// layer is re-tiered at the next batch (the device index keeps that tier's
// run last), with the new policy's counts, and later batches append to it.
func TestPlaneBookRelayout(t *testing.T) {
	sp := kv.MustParseSpec("bw:h20:m40:l40:w4:s1:r16:blk32").Planes
	const layers, hkv = 3, 2
	k := newPlaneBook(sp, 8, 2, layers, hkv, 32)
	var b model.Batch
	b.Add(1, 0, make([]int32, 20)...)
	if err := k.check(&b, 64, 256); err != nil {
		t.Fatal(err)
	}
	seqs, _ := k.reserve(&b)
	g := seqs[0]
	if g.last != kv.High {
		t.Fatalf("new tokens' tier %v, want High", g.last)
	}
	var b2 model.Batch
	b2.Add(1, 20, 0)
	if jobs := k.retierJobs(&b2); len(jobs) != 0 {
		t.Fatalf("%d re-tier jobs with the policy unchanged", len(jobs))
	}
	med, err := kv.ParsePlanePolicy("m100:w0:s0", sp)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.setPolicy(1, med); err != nil {
		t.Fatal(err)
	}
	jobs := k.retierJobs(&b2)
	if len(jobs) != layers {
		t.Fatalf("%d re-tier jobs after the new tier changed, want %d (every layer)", len(jobs), layers)
	}
	for _, j := range jobs {
		if rj := k.retierLayer(j.g, j.layer); rj.Last != kv.Medium || rj.KM != 20 {
			t.Errorf("layer %d: job %+v, want every token Medium and Medium last", j.layer, rj)
		}
	}
	if jobs := k.retierJobs(&b2); len(jobs) != 0 {
		t.Errorf("%d re-tier jobs right after the re-tier", len(jobs))
	}
	k.reserve(&b2)
	recountMix(t, "after the relayout", &k)
	if got := g.counts[2][1]; got != [kv.NumTiers]int{kv.Medium: 21} {
		t.Errorf("counts %v, want 21 Medium", got)
	}
}
