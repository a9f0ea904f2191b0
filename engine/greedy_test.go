package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/backend/cpu"
	"github.com/bitdecode/bitdecode/internal/tinymodel"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/kvcache"
	"github.com/bitdecode/bitdecode/model"
	"github.com/bitdecode/bitdecode/tokenizer"
)

// TestSamplerOutput checks which options let Forward return the greedy
// token alone: temperature 0 with nothing that changes or reports the
// distribution (presence and frequency penalties only once a token was
// generated).
func TestSamplerOutput(t *testing.T) {
	cases := []struct {
		o         SampleOptions
		generated int
		want      model.Output
	}{
		{SampleOptions{}, 0, model.OutputToken},
		{SampleOptions{Seed: 9, TopK: 5, TopP: 0.5, MinP: 0.1}, 3, model.OutputToken}, // ignored at temperature 0
		{SampleOptions{RepeatPenalty: 1}, 3, model.OutputToken},
		{SampleOptions{Temperature: 0.7}, 0, model.OutputLogits},
		{SampleOptions{Logprobs: true}, 0, model.OutputLogits},
		{SampleOptions{RepeatPenalty: 1.1}, 0, model.OutputLogits},
		{SampleOptions{PresencePenalty: 0.5}, 0, model.OutputToken},
		{SampleOptions{PresencePenalty: 0.5}, 1, model.OutputLogits},
		{SampleOptions{FrequencyPenalty: -1}, 2, model.OutputLogits},
		{SampleOptions{LogitBias: map[int]float64{3: 0}}, 0, model.OutputLogits},
	}
	for _, c := range cases {
		if got := NewSampler(c.o).Output(c.generated); got != c.want {
			t.Errorf("%+v after %d generated: output %d, want %d", c.o, c.generated, got, c.want)
		}
	}
}

// argmaxCPU is the CPU backend with backend.Argmaxer, so that Forward
// leaves the rows of sequences that ask for their token alone out of its
// Logits, as the CUDA backend does: a sampler that wrongly relied on such
// a row would find none.
type argmaxCPU struct {
	*cpu.Backend
	mu     sync.Mutex
	tokens map[backend.Tensor][]int32
}

func (b *argmaxCPU) ArgmaxRows(dst, src backend.Tensor) {
	x, err := b.Float32s(src)
	if err != nil {
		panic(err)
	}
	R, V := backend.Matrix(src.Shape())
	t := make([]int32, R)
	for i := range t {
		t[i] = int32(model.Argmax(x[i*V : (i+1)*V]))
	}
	b.mu.Lock()
	b.tokens[dst] = t
	b.mu.Unlock()
}

func (b *argmaxCPU) DownloadInt32(dst []int32, src backend.Tensor) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	copy(dst, b.tokens[src])
	return nil
}

// wholeModel asks Forward for every row whole: the path before
// Seq.Output, the reference of the token path.
type wholeModel struct{ model.Model }

func (m wholeModel) Forward(b *model.Batch, attn model.Attention) (*model.Logits, error) {
	for i := range b.Seqs {
		b.Seqs[i].Output = model.OutputLogits
	}
	return m.Model.Forward(b, attn)
}

// TestGreedyTokensMatchWholeRows serves requests of every sampling kind
// (greedy, greedy with a repetition penalty, a presence penalty or log
// probabilities, sampled) through Generate and the scheduler on a backend
// that picks greedy tokens itself, and requires the same tokens, texts and
// log probabilities as with every row downloaded whole.
func TestGreedyTokensMatchWholeRows(t *testing.T) {
	dir := t.TempDir()
	if err := tinymodel.Write(dir, 1); err != nil {
		t.Fatal(err)
	}
	be := &argmaxCPU{Backend: cpu.New(0), tokens: map[backend.Tensor][]int32{}}
	m, err := model.Load(dir, be, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	const spec, chunk = "int4:kc32:v32:res32", 32
	samples := []SampleOptions{
		{}, {RepeatPenalty: 1.3}, {PresencePenalty: 1}, {Logprobs: true, TopLogprobs: 2},
		{Temperature: 0.8, TopK: 20, Seed: 5}, {}, {LogitBias: map[int]float64{'e': 5}},
	}
	r := rand.New(rand.NewPCG(21, 22))
	prompts := make([][]int, len(samples))
	for i := range prompts {
		prompts[i] = []int{tinymodel.BOS}
		for range 5 + r.IntN(70) {
			prompts[i] = append(prompts[i], r.IntN(256))
		}
	}
	const maxTokens = 24
	generate := func(mm model.Model, i int) Stats {
		c, err := kvcache.New(be, m.Config(), kv.MustParseSpec(spec), kvcache.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		st, err := Generate(context.Background(), mm, tok, c, 0, prompts[i], GenerateOptions{Sample: samples[i], MaxTokens: maxTokens, ChunkTokens: chunk, StopIDs: []int{}}, func(string) {})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	serve := func(mm model.Model) []Result {
		pc, err := kvcache.NewPaged(be, m.Config(), kv.MustParseSpec(spec), kvcache.Options{MaxSeqs: 4, Blocks: 64})
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		s, err := NewScheduler(mm, tok, pc, SchedulerOptions{PrefillChunk: chunk})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		res := make([]Result, len(prompts))
		var wg sync.WaitGroup
		for i, p := range prompts {
			st, err := s.Submit(context.Background(), Request{Prompt: p, MaxTokens: maxTokens, Sample: samples[i], StopIDs: []int{}})
			if err != nil {
				t.Fatal(err)
			}
			wg.Go(func() { _, res[i] = collect(t, st) })
		}
		wg.Wait()
		return res
	}
	for i := range prompts {
		got, want := generate(m, i), generate(wholeModel{m}, i)
		if fmt.Sprint(got.Tokens) != fmt.Sprint(want.Tokens) {
			t.Errorf("Generate, request %d (%+v): tokens %v, with whole rows %v", i, samples[i], got.Tokens, want.Tokens)
		}
	}
	got, want := serve(m), serve(wholeModel{m})
	for i := range prompts {
		if fmt.Sprint(got[i].Tokens) != fmt.Sprint(want[i].Tokens) || fmt.Sprint(got[i].Logprobs) != fmt.Sprint(want[i].Logprobs) {
			t.Errorf("scheduler, request %d (%+v): tokens %v logprobs %v, with whole rows %v %v", i, samples[i], got[i].Tokens, got[i].Logprobs, want[i].Tokens, want[i].Logprobs)
		}
		if len(got[i].Tokens) != maxTokens {
			t.Errorf("scheduler, request %d: %d tokens (%s, %v), want %d", i, len(got[i].Tokens), got[i].FinishReason, got[i].Err, maxTokens)
		}
	}
}
