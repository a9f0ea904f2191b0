package gpukv

// The end-to-end check of serving's batch invariance on the GPU: with the
// backend's BatchInvariant (every fp16 linear layer on linear.cu) and the
// cache's (a fixed decode split), a greedy request computes the same bits
// alone and beside other requests.

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bitdecode/bitdecode/backend/gpu"
	"github.com/bitdecode/bitdecode/engine"
	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/kvcache"
	"github.com/bitdecode/bitdecode/model"
	"github.com/bitdecode/bitdecode/model/gotiny"
	"github.com/bitdecode/bitdecode/tokenizer"
)

// invariantChunk is the prefill chunk of these tests: one int4 block, so
// the scheduler keeps it as given.
const invariantChunk = 128

// invariantModel opens a batch-invariant CUDA backend with the embedded
// model (model/gotiny), or skips without a GPU.
func invariantModel(t *testing.T) (*gpu.Backend, model.Model, *tokenizer.Tokenizer) {
	t.Helper()
	be, err := gpu.Open(0, gpu.Options{BatchInvariant: true})
	if err != nil {
		if errors.Is(err, cuda.ErrNoDriver) || errors.Is(err, cuda.ErrNoDevice) {
			t.Skipf("no CUDA device: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	m, err := gotiny.Load(be, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	tok, err := gotiny.Tokenizer()
	if err != nil {
		t.Fatal(err)
	}
	return be, m, tok
}

// invariantCache is a batch-invariant int4 GPU cache for 4 sequences.
func invariantCache(t *testing.T, be *gpu.Backend, m model.Model) *Paged {
	t.Helper()
	c, err := NewPaged(be, m.Config(), kv.MustParseSpec("int4"), kvcache.Options{MaxSeqs: 4, MaxLen: 640, MaxChunk: invariantChunk, BatchInvariant: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// greedySeq is one sequence of a hand-driven batch run: its prompt, when
// it joins (step), how many tokens it generates, and what it produced: the
// greedy tokens and the logits row of every step it was in.
type greedySeq struct {
	id, join, gen int
	prompt        []int32
	pos           int
	tokens        []int32
	rows          [][]float32
}

// work returns the tokens the sequence brings to the next step: its next
// prefill chunk, or its last greedy token.
func (s *greedySeq) work() []int32 {
	if s.pos < len(s.prompt) {
		return s.prompt[s.pos:min(len(s.prompt), s.pos+invariantChunk)]
	}
	return s.tokens[len(s.tokens)-1:]
}

func (s *greedySeq) done() bool { return len(s.tokens) == s.gen }

// runGreedy drives seqs through one cache step by step, as the scheduler
// does (each step: every running sequence's next chunk or token), and
// records each sequence's logits rows and greedy tokens.
func runGreedy(t *testing.T, m model.Model, c *Paged, seqs []*greedySeq) {
	t.Helper()
	for step := 0; ; step++ {
		var b model.Batch
		var in []*greedySeq
		running := false
		for _, s := range seqs {
			if s.done() {
				continue
			}
			running = true
			if s.join > step {
				continue
			}
			if s.pos == 0 && len(s.rows) == 0 {
				ids := make([]int, len(s.prompt))
				for i, v := range s.prompt {
					ids[i] = int(v)
				}
				if cached, err := c.Open(s.id, ids); err != nil || cached != 0 {
					t.Fatalf("open sequence %d: %d cached, %v", s.id, cached, err)
				}
			}
			b.Add(s.id, s.pos, s.work()...)
			in = append(in, s)
		}
		if !running {
			return
		}
		if len(in) == 0 {
			continue
		}
		lg, err := m.Forward(&b, c)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		for i, s := range in {
			row := lg.Data[i*lg.Vocab : (i+1)*lg.Vocab]
			s.rows = append(s.rows, row)
			s.pos += b.Seqs[i].Len
			if s.pos >= len(s.prompt) {
				best := 0
				for v := range row {
					if row[v] > row[best] {
						best = v
					}
				}
				s.tokens = append(s.tokens, int32(best))
				if s.done() {
					c.Remove(s.id)
				}
			}
		}
	}
}

// randomPrompt is n token ids of the embedded model's vocabulary.
func randomPrompt(r *rand.Rand, n, vocab int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(2 + r.IntN(vocab-2))
	}
	return p
}

// TestGPUBatchInvariantLogits runs a greedy sequence (a 300-token prompt:
// three prefill chunks, then 40 tokens) alone, then beside three others
// that join before it, during its prefill and during its decode (their
// prefill chunks share its steps, their lengths differ, they finish at
// other times), and requires every logits row it gets, and so every greedy
// token, to be bitwise the same. "default" runs the cache's split rule
// (biSplit), under which sequences this short all split at 512 tokens;
// "scaled" the same rule scaled down (128 tokens, at most 2 splits while it
// can double, at most 512): the sequences' splits then grow with their
// lengths (128, 256, 512 tokens) and differ from the launch's guess.
func TestGPUBatchInvariantLogits(t *testing.T) {
	for _, c := range []struct {
		name            string
		base, cap, most int
	}{
		{"default", gpuDecodeSplit, gpuDecodeSplitCap, gpuDecodeSplitMax},
		{"scaled", 128, 2, 512},
	} {
		t.Run(c.name, func(t *testing.T) {
			old := biSplit
			defer func() { biSplit = old }()
			biSplit.base, biSplit.cap, biSplit.max = c.base, c.cap, c.most
			testBatchInvariantLogits(t)
		})
	}
}

// testBatchInvariantLogits is TestGPUBatchInvariantLogits under the
// current biSplit.
func testBatchInvariantLogits(t *testing.T) {
	be, m, _ := invariantModel(t)
	vocab := m.Config().Vocab
	r := rand.New(rand.NewPCG(11, 12))
	prompt := randomPrompt(r, 300, vocab)
	const gen = 40

	solo := &greedySeq{id: 1, gen: gen, prompt: prompt}
	runGreedy(t, m, invariantCache(t, be, m), []*greedySeq{solo})

	a := &greedySeq{id: 1, join: 1, gen: gen, prompt: prompt}
	others := []*greedySeq{
		{id: 7, join: 0, gen: 12, prompt: randomPrompt(r, 150, vocab)},
		a,
		{id: 3, join: 2, gen: 30, prompt: randomPrompt(r, 260, vocab)},
		{id: 9, join: 6, gen: 50, prompt: randomPrompt(r, 5, vocab)},
	}
	runGreedy(t, m, invariantCache(t, be, m), others)

	if len(a.rows) != len(solo.rows) {
		t.Fatalf("%d steps in the batch, %d alone", len(a.rows), len(solo.rows))
	}
	for i := range solo.rows {
		for v := range solo.rows[i] {
			if math.Float32bits(a.rows[i][v]) != math.Float32bits(solo.rows[i][v]) {
				t.Fatalf("step %d of the sequence: logit %d = %g in the batch, %g alone", i, v, a.rows[i][v], solo.rows[i][v])
			}
		}
	}
	for i := range solo.tokens {
		if a.tokens[i] != solo.tokens[i] {
			t.Fatalf("token %d: %d in the batch, %d alone", i, a.tokens[i], solo.tokens[i])
		}
	}
	t.Logf("%d logits rows and %d greedy tokens bitwise equal alone and in the batch", len(solo.rows), len(solo.tokens))
}

// TestGPUBatchInvariantScheduler serves greedy requests of different
// lengths through the scheduler on one batch-invariant cache (4 slots,
// prefill chunks beside decode steps, no preemption) and requires every
// text to be the one it gets alone (engine.Generate with the same chunk).
func TestGPUBatchInvariantScheduler(t *testing.T) {
	be, m, tok := invariantModel(t)
	r := rand.New(rand.NewPCG(13, 14))
	lens := []int{300, 20, 170, 64, 250, 9}
	const maxTokens = 48
	prompts := make([][]int, len(lens))
	solo := make([]string, len(lens))
	for i, n := range lens {
		for _, v := range randomPrompt(r, n, m.Config().Vocab) {
			prompts[i] = append(prompts[i], int(v))
		}
		c := invariantCache(t, be, m)
		var out []byte
		if _, err := engine.Generate(context.Background(), m, tok, c, 0, prompts[i], engine.GenerateOptions{MaxTokens: maxTokens, ChunkTokens: invariantChunk, StopIDs: []int{}},
			func(s string) { out = append(out, s...) }); err != nil {
			t.Fatal(err)
		}
		solo[i] = string(out)
	}
	c := invariantCache(t, be, m)
	s, err := engine.NewScheduler(m, tok, c, engine.SchedulerOptions{MaxSeqs: 4, PrefillChunk: invariantChunk})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	streams := make([]*engine.Stream, len(prompts))
	for i, p := range prompts {
		if streams[i], err = s.Submit(context.Background(), engine.Request{Prompt: p, MaxTokens: maxTokens, StopIDs: []int{}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range prompts {
		got, res := collect(t, streams[i])
		if res.CompletionTokens != maxTokens {
			t.Errorf("request %d: %d tokens (%s), want %d", i, res.CompletionTokens, res.FinishReason, maxTokens)
		}
		if got != solo[i] {
			t.Errorf("request %d (%d prompt tokens): batched text %q, alone %q", i, lens[i], got, solo[i])
		}
	}
}
