package engine

import (
	"math"
	"testing"
)

// TestSamplerPenaltiesAndBias checks the OpenAI penalties and logit bias
// against their definitions on hand-made logits: presence subtracts once per
// generated token, frequency once per occurrence, the prompt does not count,
// and a bias of -100 bans a token while +100 forces one.
func TestSamplerPenaltiesAndBias(t *testing.T) {
	base := []float32{1, 2, 3, 0.5}
	context := []int{3, 3, 2, 2, 2, 0} // prompt 3 3; generated 2 2 2 0
	const generated = 4
	cases := []struct {
		o    SampleOptions
		want []float32
	}{
		{SampleOptions{PresencePenalty: 0.5}, []float32{0.5, 2, 2.5, 0.5}},
		{SampleOptions{FrequencyPenalty: 0.5}, []float32{0.5, 2, 1.5, 0.5}},
		{SampleOptions{PresencePenalty: -1, FrequencyPenalty: 1}, []float32{1, 2, 1, 0.5}},
		{SampleOptions{LogitBias: map[int]float64{3: 2, 0: -1}}, []float32{0, 2, 3, 2.5}},
	}
	for _, c := range cases {
		l := append([]float32(nil), base...)
		NewSampler(c.o).penalize(l, context, generated)
		for i := range l {
			if math.Abs(float64(l[i]-c.want[i])) > 1e-6 {
				t.Errorf("%+v: logits %v, want %v", c.o, l, c.want)
				break
			}
		}
	}
	ban := NewSampler(SampleOptions{LogitBias: map[int]float64{2: -100}})
	if got := ban.Sample(append([]float32(nil), base...), nil); got != 1 {
		t.Errorf("bias -100 on the argmax: sampled %d, want 1", got)
	}
	force := NewSampler(SampleOptions{Temperature: 1, Seed: 3, LogitBias: map[int]float64{3: 100}})
	for range 50 {
		if got := force.Sample(append([]float32(nil), base...), nil); got != 3 {
			t.Fatalf("bias +100: sampled %d, want 3", got)
		}
	}
	for _, bad := range []SampleOptions{{PresencePenalty: 2.5}, {FrequencyPenalty: math.NaN()}, {LogitBias: map[int]float64{1: 101}},
		{LogitBias: map[int]float64{-1: 1}}, {TopLogprobs: MaxTopLogprobs + 1}} {
		if bad.Validate() == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// TestSamplerLogprobs checks the reported log probabilities against the
// float64 log-softmax of the raw logits (before penalties and temperature)
// and the order of the alternatives.
func TestSamplerLogprobs(t *testing.T) {
	logits := []float32{0.1, 2, -1, 2, 0.7}
	var sum float64
	for _, x := range logits {
		sum += math.Exp(float64(x))
	}
	want := func(i int) float64 { return float64(logits[i]) - math.Log(sum) }
	s := NewSampler(SampleOptions{Logprobs: true, TopLogprobs: 3, RepeatPenalty: 2})
	got := s.SampleLogprob(append([]float32(nil), logits...), []int{1}, 0)
	// Greedy after the repetition penalty halves token 1: token 3.
	if got.ID != 3 || math.Abs(got.Logprob-want(3)) > 1e-12 {
		t.Errorf("sampled %d with logprob %g, want 3 with %g", got.ID, got.Logprob, want(3))
	}
	order := []int{1, 3, 4} // ties (1 and 3) by id
	if len(got.Top) != 3 {
		t.Fatalf("top %v, want 3 entries", got.Top)
	}
	for i, id := range order {
		if got.Top[i].ID != id || math.Abs(got.Top[i].Logprob-want(id)) > 1e-12 {
			t.Errorf("top[%d] = %+v, want token %d with %g", i, got.Top[i], id, want(id))
		}
	}
	if none := NewSampler(SampleOptions{}).SampleLogprob(append([]float32(nil), logits...), nil, 0); none.Logprob != 0 || none.Top != nil {
		t.Errorf("logprobs reported without being asked: %+v", none)
	}
}
