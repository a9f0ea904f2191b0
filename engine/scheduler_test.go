package engine

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/backend/cpu"
	"github.com/bitdecode/bitdecode/internal/testmodel"
	"github.com/bitdecode/bitdecode/internal/tinymodel"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/kvcache"
	"github.com/bitdecode/bitdecode/model"
	"github.com/bitdecode/bitdecode/tokenizer"
)

// collect reads a stream to its end.
func collect(t testing.TB, st *Stream) (string, Result) {
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

// schedCase is one request of a scheduler test with its solo reference.
type schedCase struct {
	prompt []int
	max    int
	want   string
	wantN  int
}

// soloReference generates each case alone with Generate over an unbounded
// CPU cache (kvcache.New: Paged, or Planes for bw; the same chunking), the oracle the
// scheduler must match.
func soloReference(t *testing.T, be backend.Backend, m model.Model, tok *tokenizer.Tokenizer, spec string, chunk int, cases []schedCase) {
	t.Helper()
	for i := range cases {
		c, err := kvcache.New(be, m.Config(), kv.MustParseSpec(spec), kvcache.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		st, err := Generate(context.Background(), m, tok, c, 0, cases[i].prompt, GenerateOptions{MaxTokens: cases[i].max, ChunkTokens: chunk}, func(s string) { out.WriteString(s) })
		if err != nil {
			t.Fatal(err)
		}
		cases[i].want, cases[i].wantN = out.String(), st.GeneratedTokens
	}
}

func tinyCases(r *rand.Rand, n int, common []int) []schedCase {
	cases := make([]schedCase, n)
	for i := range cases {
		var p []int
		p = append(p, tinymodel.BOS)
		if i%3 == 0 {
			p = append(p, common...)
		}
		for range 1 + r.IntN(90) {
			p = append(p, r.IntN(256))
		}
		cases[i] = schedCase{prompt: p, max: 8 + r.IntN(40)}
	}
	return cases
}

// tinySchedCases draws n cases (half under -short), a third of them sharing
// a 70-token prefix.
func tinySchedCases(r *rand.Rand, n int) []schedCase {
	common := make([]int, 70)
	for i := range common {
		common[i] = r.IntN(256)
	}
	if testing.Short() {
		n /= 2
	}
	return tinyCases(r, n, common)
}

// pagedScheduler starts a scheduler over a paged cache of format spec with
// blocks blocks and maxSeqs sequence slots, prefilling in chunks of chunk.
func pagedScheduler(t *testing.T, be backend.Backend, m model.Model, tok *tokenizer.Tokenizer, spec string, chunk, blocks, maxSeqs int) (*kvcache.Paged, *Scheduler) {
	t.Helper()
	pc, err := kvcache.NewPaged(be, m.Config(), kv.MustParseSpec(spec), kvcache.Options{MaxSeqs: maxSeqs, Blocks: blocks})
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewScheduler(m, tok, pc, SchedulerOptions{PrefillChunk: chunk})
	if err != nil {
		t.Fatal(err)
	}
	return pc, s
}

// TestSchedulerMatchesSolo submits many greedy requests at once (a third
// share a 70-token prefix) and checks that each one's streamed text and
// token count equal its solo run through Generate and KVCache, with ample
// memory (prefix sharing, no preemption) and with a pool so small that the
// scheduler must queue and preempt; at the end every block is free and the
// allocator's invariants hold.
func TestSchedulerMatchesSolo(t *testing.T) {
	m, tok, be := tiny(t)
	const spec, chunk = "int4:kc32:v32:res32", 64
	cases := tinySchedCases(rand.New(rand.NewPCG(11, 12)), 24)
	soloReference(t, be, m, tok, spec, chunk, cases)
	for _, c := range cases[:3] {
		t.Logf("solo: %d tokens %q", c.wantN, c.want)
	}
	schedMatchesSolo(t, be, m, tok, spec, chunk, cases)
}

// schedMatchesSolo submits cases (with their solo references) at once to a
// scheduler over a paged cache of spec, with an ample pool (no preemption)
// and a tight one (which must preempt), and checks each request's text and
// token count against its solo run, and that every block is free at the
// end.
func schedMatchesSolo(t *testing.T, be backend.Backend, m model.Model, tok *tokenizer.Tokenizer, spec string, chunk int, cases []schedCase) {
	t.Helper()
	for _, cfg := range []struct {
		name            string
		blocks, maxSeqs int
		wantPreempt     bool
	}{
		{"ample", 400, 16, false},
		{"tight", 9, 8, true},
	} {
		t.Run(cfg.name, func(t *testing.T) {
			pc, s := pagedScheduler(t, be, m, tok, spec, chunk, cfg.blocks, cfg.maxSeqs)
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
			t.Logf("%s: %d steps, %d preemptions, %d prompt tokens computed, %d shared", cfg.name, st.Steps, st.Preemptions, st.PromptTokens, st.CachedTokens)
			if cfg.wantPreempt && st.Preemptions == 0 {
				t.Error("the tight pool never preempted")
			}
			// Whether a prefix is shared depends on timing (the first request
			// with it must have packed its blocks before another is admitted;
			// under -race all are often admitted in one step), so sharing is
			// asserted by TestPagedPrefixSharing, not here.
			if !cfg.wantPreempt && st.Preemptions != 0 {
				t.Errorf("ample pool: %d preemptions", st.Preemptions)
			}
			if pc.FreeBlocks() != pc.TotalBlocks() || pc.Seqs() != 0 {
				t.Errorf("leak: %d of %d blocks free, %d sequences", pc.FreeBlocks(), pc.TotalBlocks(), pc.Seqs())
			}
			if err := pc.Allocator().Check(); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestSchedulerReferenceModel runs the golden prompts of the real
// checkpoint through the scheduler, all at once, and compares each with its
// solo Generate run (skipped without the checkpoint).
func TestSchedulerReferenceModel(t *testing.T) {
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
	prompts := []string{"func main() {", "package http\n\nimport (", "// Copyright 2024", "type Server struct {", "for i := 0; i < n; i++ {", "if err != nil {"}
	var cases []schedCase
	for _, p := range prompts {
		cases = append(cases, schedCase{prompt: tok.Encode(p, true), max: 24})
	}
	const spec = "int4"
	soloReference(t, be, m, tok, spec, 256, cases)
	pc, err := kvcache.NewPaged(be, m.Config(), kv.MustParseSpec(spec), kvcache.Options{MaxSeqs: 8, Blocks: 16})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := NewScheduler(m, tok, pc, SchedulerOptions{})
	defer s.Close()
	streams := make([]*Stream, len(cases))
	for i, c := range cases {
		if streams[i], err = s.Submit(context.Background(), Request{Prompt: c.prompt, MaxTokens: c.max}); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range cases {
		got, res := collect(t, streams[i])
		if got != c.want {
			t.Errorf("prompt %q: batched %q, solo %q (%s)", prompts[i], got, c.want, res.FinishReason)
		}
	}
}

// TestSchedulerCancelAndLimits checks cancellation mid-stream (the blocks
// are freed at once and the result says cancelled), stop strings, max
// tokens, seeded sampling, and Submit's errors.
func TestSchedulerCancelAndLimits(t *testing.T) {
	m, tok, be := tiny(t)
	pc, err := kvcache.NewPaged(be, m.Config(), kv.MustParseSpec("int4:kc32:v32:res32"), kvcache.Options{MaxSeqs: 4, Blocks: 40})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := NewScheduler(m, tok, pc, SchedulerOptions{PrefillChunk: 32, MaxQueue: 8})
	defer s.Close()
	prompt := []int{tinymodel.BOS, 'h', 'e', 'l', 'l', 'o'}

	// Cancel after the first piece of text.
	ctx, cancel := context.WithCancel(context.Background())
	st, err := s.Submit(ctx, Request{Prompt: prompt, MaxTokens: 1000, StopIDs: []int{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Next(context.Background()); err != nil {
		t.Fatal(err)
	}
	cancel()
	_, res := collect(t, st)
	if res.FinishReason != FinishCancelled || !errors.Is(res.Err, context.Canceled) {
		t.Errorf("cancelled request: %q %v", res.FinishReason, res.Err)
	}
	waitFor(t, func() bool { return s.Stats().Running == 0 && pc.FreeBlocks() == pc.TotalBlocks() })

	// Max tokens and seeded sampling.
	sample := SampleOptions{Temperature: 1, TopP: 0.9, Seed: 42}
	var texts []string
	for range 2 {
		st, err := s.Submit(context.Background(), Request{Prompt: prompt, MaxTokens: 30, Sample: sample, StopIDs: []int{}})
		if err != nil {
			t.Fatal(err)
		}
		text, res := collect(t, st)
		if res.CompletionTokens != 30 || res.FinishReason != FinishLength {
			t.Errorf("max tokens 30: %d tokens, %q", res.CompletionTokens, res.FinishReason)
		}
		texts = append(texts, text)
	}
	if texts[0] != texts[1] {
		t.Errorf("same seed, different texts %q %q", texts[0], texts[1])
	}

	// A stop string cuts the text before it and is not emitted.
	st, _ = s.Submit(context.Background(), Request{Prompt: prompt, MaxTokens: 30, Sample: sample, StopIDs: []int{}})
	full, _ := collect(t, st)
	if len(full) > 8 {
		stop := full[5:8]
		st, _ = s.Submit(context.Background(), Request{Prompt: prompt, MaxTokens: 30, Sample: sample, StopIDs: []int{}, Stop: []string{stop}})
		got, res := collect(t, st)
		if want := full[:strings.Index(full, stop)]; got != want || res.FinishReason != FinishStop {
			t.Errorf("stop %q: got %q (%s), want %q", stop, got, res.FinishReason, want)
		}
	}

	// Errors.
	var ce *ContextError
	if _, err := s.Submit(context.Background(), Request{Prompt: prompt, MaxTokens: 5000}); !errors.As(err, &ce) || ce.Limit != s.ContextLimit() {
		t.Errorf("oversized request: %v", err)
	}
	for _, bad := range []Request{{MaxTokens: 1}, {Prompt: []int{-1}, MaxTokens: 1}, {Prompt: []int{tinymodel.Vocab}, MaxTokens: 1},
		{Prompt: prompt}, {Prompt: prompt, MaxTokens: 1, Sample: SampleOptions{Temperature: -1}}} {
		if _, err := s.Submit(context.Background(), bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	s.Close()
	if _, err := s.Submit(context.Background(), Request{Prompt: prompt, MaxTokens: 1}); !errors.Is(err, ErrClosed) {
		t.Errorf("submit after close: %v", err)
	}
	if pc.FreeBlocks() != pc.TotalBlocks() {
		t.Errorf("%d of %d blocks free after close", pc.FreeBlocks(), pc.TotalBlocks())
	}
}

// TestSchedulerQueueFull fills the queue of a scheduler whose only slot is
// busy and checks ErrQueueFull, then that Close ends everything.
func TestSchedulerQueueFull(t *testing.T) {
	m, tok, be := tiny(t)
	pc, _ := kvcache.NewPaged(be, m.Config(), kv.MustParseSpec("int4:kc32:v32:res32"), kvcache.Options{MaxSeqs: 1, Blocks: 40})
	s, _ := NewScheduler(m, tok, pc, SchedulerOptions{MaxQueue: 3})
	var streams []*Stream
	var full error
	for i := 0; i < 10 && full == nil; i++ {
		st, err := s.Submit(context.Background(), Request{Prompt: []int{tinymodel.BOS, 'a' + i}, MaxTokens: 500, StopIDs: []int{}})
		if err != nil {
			full = err
			break
		}
		streams = append(streams, st)
	}
	if !errors.Is(full, ErrQueueFull) {
		t.Fatalf("10 requests on 1 slot and a queue of 3: %v", full)
	}
	s.Close()
	for _, st := range streams {
		_, res := collect(t, st)
		if res.FinishReason != FinishError || !errors.Is(res.Err, ErrClosed) {
			t.Errorf("after Close: %q %v", res.FinishReason, res.Err)
		}
	}
	if pc.FreeBlocks() != pc.TotalBlocks() || pc.Seqs() != 0 {
		t.Errorf("leak after Close: %d of %d free", pc.FreeBlocks(), pc.TotalBlocks())
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// recordingCache wraps a kvcache.Cache and records each batch's shape: the
// scheduler sees only the interface, as it will a GPU cache.
type recordingCache struct {
	kvcache.Cache
	mu      sync.Mutex
	batches [][]int // per batch, the tokens of each sequence
}

func (c *recordingCache) Begin(b *model.Batch) error {
	var lens []int
	for _, s := range b.Seqs {
		lens = append(lens, s.Len)
	}
	c.mu.Lock()
	c.batches = append(c.batches, lens)
	c.mu.Unlock()
	return c.Cache.Begin(b)
}

// TestSchedulerBoundedChunks submits long prompts while short requests
// decode and checks every step: at most one sequence contributes more than
// one token, and that chunk is at most PrefillChunk tokens, so a long
// prompt stalls the decoding streams by one bounded chunk per step; the
// decoding requests keep getting a token in the steps that prefill.
func TestSchedulerBoundedChunks(t *testing.T) {
	m, tok, be := tiny(t)
	pc, err := kvcache.NewPaged(be, m.Config(), kv.MustParseSpec("int4:kc32:v32:res32"), kvcache.Options{MaxSeqs: 6, Blocks: 100})
	if err != nil {
		t.Fatal(err)
	}
	rc := &recordingCache{Cache: pc}
	const chunk = 64
	s, _ := NewScheduler(m, tok, rc, SchedulerOptions{PrefillChunk: chunk})
	defer s.Close()
	r := rand.New(rand.NewPCG(1, 2))
	long := func(n int) []int {
		p := []int{tinymodel.BOS}
		for range n {
			p = append(p, r.IntN(256))
		}
		return p
	}
	var streams []*Stream
	for i := range 3 { // decoding streams
		st, err := s.Submit(context.Background(), Request{Prompt: long(5 + i), MaxTokens: 60, StopIDs: []int{}})
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, st)
	}
	for _, n := range []int{700, 400} { // long prompts
		st, err := s.Submit(context.Background(), Request{Prompt: long(n), MaxTokens: 4, StopIDs: []int{}})
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, st)
	}
	for _, st := range streams {
		collect(t, st)
	}
	mixed := 0
	for i, lens := range rc.batches {
		multi := 0
		for _, l := range lens {
			if l > 1 {
				multi++
			}
			if l > chunk {
				t.Fatalf("step %d: a sequence fed %d tokens, chunk is %d", i, l, chunk)
			}
		}
		if multi > 1 {
			t.Fatalf("step %d: %d sequences prefill at once: %v", i, multi, lens)
		}
		if multi == 1 && len(lens) > 1 {
			mixed++
		}
	}
	if mixed == 0 {
		t.Error("no step mixed a prefill chunk with decode tokens")
	}
	t.Logf("%d steps, %d mixing a prefill chunk with decode tokens", len(rc.batches), mixed)
}

// soloPromptLogprobs scores prompt alone: its chunks (of chunk tokens, as
// the scheduler cuts them) through Forward with AllLogits over an unbounded
// cache, each row's log-softmax in float64; entry i is prompt[i+1]'s.
func soloPromptLogprobs(t *testing.T, be backend.Backend, m model.Model, spec string, chunk int, prompt []int) []float64 {
	t.Helper()
	c, err := kvcache.New(be, m.Config(), kv.MustParseSpec(spec), kvcache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var out []float64
	for pos := 0; pos < len(prompt); pos += chunk {
		end := min(len(prompt), pos+chunk)
		b := model.Batch{AllLogits: true}
		ids := make([]int32, end-pos)
		for i, id := range prompt[pos:end] {
			ids[i] = int32(id)
		}
		b.Add(0, pos, ids...)
		l, err := m.Forward(&b, c)
		if err != nil {
			t.Fatal(err)
		}
		for k := range end - pos {
			if pos+k+1 < len(prompt) {
				out = append(out, logSoftmax(l.Row(k))[prompt[pos+k+1]])
			}
		}
	}
	return out
}

// TestSchedulerPromptLogprobs scores prompts (Request.PromptLogprobs) among
// requests that only generate, some sharing a prefix with an earlier
// request, some scoring only (MaxTokens 0), in an ample pool and in one that
// preempts: every score equals the prompt's solo forward pass bit for bit,
// the alternatives are the row's best, and the generated text is unchanged.
func TestSchedulerPromptLogprobs(t *testing.T) {
	m, tok, be := tiny(t)
	const spec, chunk, top = "int4:kc32:v32:res32", 64, 3
	cases := tinySchedCases(rand.New(rand.NewPCG(21, 22)), 16)
	cases[0].prompt = cases[0].prompt[:1] // one token: nothing to score
	soloReference(t, be, m, tok, spec, chunk, cases)
	scores := make([][]float64, len(cases))
	for i, c := range cases {
		scores[i] = soloPromptLogprobs(t, be, m, spec, chunk, c.prompt)
	}
	for _, cfg := range []struct {
		name            string
		blocks, maxSeqs int
	}{{"ample", 400, 16}, {"tight", 6, 8}} {
		t.Run(cfg.name, func(t *testing.T) {
			pc, s := pagedScheduler(t, be, m, tok, spec, chunk, cfg.blocks, cfg.maxSeqs)
			if _, err := s.Submit(context.Background(), Request{Prompt: cases[1].prompt, MaxTokens: 0}); err == nil {
				t.Error("MaxTokens 0 without PromptLogprobs accepted")
			}
			var wg sync.WaitGroup
			got := make([]string, len(cases))
			res := make([]Result, len(cases))
			prompts := make([][]SampledToken, len(cases))
			scored := func(i int) bool { return i%2 == 0 }
			for i, c := range cases {
				req := Request{Prompt: c.prompt, MaxTokens: c.max}
				if scored(i) {
					req.PromptLogprobs, req.Sample = true, SampleOptions{Logprobs: true, TopLogprobs: top}
					if i%4 == 2 {
						req.MaxTokens = 0
					}
				}
				st, err := s.Submit(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				wg.Go(func() {
					var b strings.Builder
					ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
					defer cancel()
					for {
						ch, err := st.NextChunk(ctx)
						if err != nil {
							t.Error(err)
							return
						}
						if ch.Prompt != nil {
							if prompts[i] != nil || b.Len() > 0 {
								t.Errorf("request %d: the prompt's scores came twice or after text", i)
							}
							prompts[i] = ch.Prompt
						}
						b.WriteString(ch.Text)
						if ch.Done {
							got[i], res[i] = b.String(), st.Result()
							return
						}
					}
				})
			}
			wg.Wait()
			s.Close()
			for i, c := range cases {
				lp := res[i].PromptLogprobs
				switch {
				case !scored(i):
					if lp != nil || prompts[i] != nil {
						t.Errorf("request %d did not ask for prompt scores but got %d", i, len(lp))
					}
				case len(lp) != len(c.prompt)-1:
					t.Errorf("request %d: %d prompt scores for %d tokens (preempted %d times)", i, len(lp), len(c.prompt), res[i].Preemptions)
				case len(lp) > 0 && &prompts[i][0] != &lp[0]:
					t.Errorf("request %d: the streamed scores are not the result's", i)
				}
				for k := range lp {
					e := lp[k]
					if e.ID != c.prompt[k+1] || e.Logprob != scores[i][k] {
						t.Errorf("request %d token %d: id %d logprob %v, want id %d logprob %v", i, k+1, e.ID, e.Logprob, c.prompt[k+1], scores[i][k])
						break
					}
					if len(e.Top) != top || e.Top[0].Logprob < e.Logprob || (e.Top[0].ID == e.ID && e.Top[0].Logprob != e.Logprob) {
						t.Errorf("request %d token %d: alternatives %+v for logprob %v", i, k+1, e.Top, e.Logprob)
						break
					}
				}
				want, wantN := c.want, c.wantN
				if scored(i) && i%4 == 2 {
					want, wantN = "", 0
				}
				if got[i] != want || res[i].CompletionTokens != wantN {
					t.Errorf("request %d: %d tokens %q, want %d tokens %q", i, res[i].CompletionTokens, got[i], wantN, want)
				}
			}
			st := s.Stats()
			t.Logf("%s: %d steps, %d preemptions, %d shared prompt tokens", cfg.name, st.Steps, st.Preemptions, st.CachedTokens)
			if (cfg.name == "tight") != (st.Preemptions > 0) {
				t.Errorf("%s pool: %d preemptions", cfg.name, st.Preemptions)
			}
			if pc.FreeBlocks() != pc.TotalBlocks() || pc.Seqs() != 0 {
				t.Errorf("leak: %d of %d blocks free, %d sequences", pc.FreeBlocks(), pc.TotalBlocks(), pc.Seqs())
			}
		})
	}
}

// TestSchedulerSampledParallel submits sampled requests (temperature, top-p,
// penalties, log probabilities; each its own seed) together and checks that
// sampling the step's rows on several goroutines (samplePar) gives every
// request the tokens and log probabilities of sampling them one by one.
func TestSchedulerSampledParallel(t *testing.T) {
	m, tok, be := tiny(t)
	const spec, chunk = "int4:kc32:v32:res32", 64
	cases := tinySchedCases(rand.New(rand.NewPCG(21, 22)), 16)
	run := func(minWork int) []Result {
		old := parSampleMinWork
		parSampleMinWork = minWork
		defer func() { parSampleMinWork = old }()
		_, s := pagedScheduler(t, be, m, tok, spec, chunk, 400, 16)
		res := make([]Result, len(cases))
		var streams []*Stream
		for i, c := range cases {
			o := SampleOptions{Temperature: 0.9, TopP: 0.95, Seed: uint64(100 + i), Logprobs: i%2 == 0, TopLogprobs: 2 * (i % 2), FrequencyPenalty: 0.3}
			st, err := s.Submit(context.Background(), Request{Prompt: c.prompt, MaxTokens: c.max, Sample: o})
			if err != nil {
				t.Fatal(err)
			}
			streams = append(streams, st)
		}
		var wg sync.WaitGroup
		for i, st := range streams {
			wg.Go(func() { _, res[i] = collect(t, st) })
		}
		wg.Wait()
		s.Close()
		return res
	}
	serial, par := run(1<<62), run(0)
	for i := range cases {
		a, b := serial[i], par[i]
		if !slices.Equal(a.Tokens, b.Tokens) || a.FinishReason != b.FinishReason {
			t.Errorf("request %d: parallel sampling gave %v (%s), serial %v (%s)", i, b.Tokens, b.FinishReason, a.Tokens, a.FinishReason)
			continue
		}
		if len(a.Logprobs) != len(b.Logprobs) {
			t.Errorf("request %d: %d logprobs in parallel, %d serial", i, len(b.Logprobs), len(a.Logprobs))
			continue
		}
		for j := range a.Logprobs {
			if a.Logprobs[j].ID != b.Logprobs[j].ID || a.Logprobs[j].Logprob != b.Logprobs[j].Logprob || len(a.Logprobs[j].Top) != len(b.Logprobs[j].Top) {
				t.Errorf("request %d token %d: logprob %+v in parallel, %+v serial", i, j, b.Logprobs[j], a.Logprobs[j])
				break
			}
		}
	}
}

// windowedTiny loads the tiny model with a sliding window of window tokens
// on layer 0 and full attention on layer 1 (config.json's layer_types), and
// the plain tiny model beside it.
func windowedTiny(t *testing.T, window int) (windowed, plain model.Model, tok *tokenizer.Tokenizer, be *cpu.Backend) {
	t.Helper()
	plain, tok, be = tiny(t)
	dir := t.TempDir()
	if err := tinymodel.Write(dir, 1); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "config.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["sliding_window"] = window
	cfg["layer_types"] = []string{"sliding_attention", "full_attention"}
	if raw, err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	windowed, err = model.Load(dir, be, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { windowed.Close() })
	if got := windowed.Config().LayerWindows; !slices.Equal(got, []int{window, 0}) {
		t.Fatalf("LayerWindows = %v, want [%d 0]", got, window)
	}
	return windowed, plain, tok, be
}

// TestSchedulerSlidingWindow runs TestSchedulerMatchesSolo's requests on a
// model whose first layer has a sliding window of 40 tokens (not a
// multiple of the 32-token blocks; prompts and generations reach 200
// tokens): the paged cache attends within the window on that layer alone,
// under prefix sharing and preemption, and each request matches its solo
// run. That the window is applied at all: some requests' solo text differs
// from the same model without the window.
func TestSchedulerSlidingWindow(t *testing.T) {
	const spec, chunk, window = "int4:kc32:v32:res32", 64, 40
	m, plain, tok, be := windowedTiny(t, window)
	cases := tinySchedCases(rand.New(rand.NewPCG(21, 22)), 24)
	full := slices.Clone(cases)
	soloReference(t, be, m, tok, spec, chunk, cases)
	soloReference(t, be, plain, tok, spec, chunk, full)
	differ, long := 0, 0
	for i := range cases {
		if cases[i].want != full[i].want {
			differ++
		}
		if len(cases[i].prompt)+cases[i].wantN > window {
			long++
		}
	}
	t.Logf("%d of %d requests go past the window; %d differ from the model without it", long, len(cases), differ)
	if differ == 0 {
		t.Fatal("the window changed no request's text: is it applied?")
	}
	schedMatchesSolo(t, be, m, tok, spec, chunk, cases)
}
