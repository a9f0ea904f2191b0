package gpukv

// Greedy tokens picked on the GPU (model.OutputToken, the CUDA backend's
// ArgmaxRows; docs/perf/decode-step.md v23) against the same requests with
// every row of logits downloaded and picked on the host.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/bitdecode/bitdecode/engine"
	"github.com/bitdecode/bitdecode/model"
)

// wholeModel asks Forward for every row whole: the path before
// Seq.Output, the reference of the token path.
type wholeModel struct{ model.Model }

func (m wholeModel) Forward(b *model.Batch, attn model.Attention) (*model.Logits, error) {
	for i := range b.Seqs {
		b.Seqs[i].Output = model.OutputLogits
	}
	return m.Model.Forward(b, attn)
}

// TestGPUGreedyTokens serves requests through the scheduler on a
// batch-invariant GPU cache (so that a request's bits do not depend on
// what shares its steps): greedy ones, whose tokens the GPU picks, beside
// ones whose samplers need their rows (a repetition penalty, log
// probabilities, temperature), and requires every request's tokens and log
// probabilities to be those of the same run with every row downloaded and
// picked on the host.
func TestGPUGreedyTokens(t *testing.T) {
	be, m, tok := invariantModel(t)
	r := rand.New(rand.NewPCG(31, 32))
	samples := []engine.SampleOptions{{}, {}, {RepeatPenalty: 1.2}, {}, {Logprobs: true, TopLogprobs: 3}, {Temperature: 0.9, Seed: 4}, {}}
	lens := []int{300, 20, 170, 64, 250, 9, 130}
	const maxTokens = 40
	prompts := make([][]int, len(lens))
	for i, n := range lens {
		for _, v := range randomPrompt(r, n, m.Config().Vocab) {
			prompts[i] = append(prompts[i], int(v))
		}
	}
	serve := func(mm model.Model) []engine.Result {
		c := invariantCache(t, be, m)
		s, err := engine.NewScheduler(mm, tok, c, engine.SchedulerOptions{MaxSeqs: 4, PrefillChunk: invariantChunk})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		streams := make([]*engine.Stream, len(prompts))
		for i, p := range prompts {
			if streams[i], err = s.Submit(context.Background(), engine.Request{Prompt: p, MaxTokens: maxTokens, Sample: samples[i], StopIDs: []int{}}); err != nil {
				t.Fatal(err)
			}
		}
		res := make([]engine.Result, len(prompts))
		for i := range prompts {
			_, res[i] = collect(t, streams[i])
		}
		return res
	}
	got, want := serve(m), serve(wholeModel{m})
	for i := range prompts {
		if len(got[i].Tokens) != maxTokens {
			t.Errorf("request %d: %d tokens (%s, %v), want %d", i, len(got[i].Tokens), got[i].FinishReason, got[i].Err, maxTokens)
		}
		if fmt.Sprint(got[i].Tokens) != fmt.Sprint(want[i].Tokens) || fmt.Sprint(got[i].Logprobs) != fmt.Sprint(want[i].Logprobs) {
			t.Errorf("request %d (%+v): tokens %v, with every row on the host %v", i, samples[i], got[i].Tokens, want[i].Tokens)
		}
	}
	t.Logf("%d requests of %d tokens: the same tokens with greedy rows picked on the GPU as with every row on the host", len(prompts), maxTokens)
}
