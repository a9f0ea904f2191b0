package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
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

// refFiltered is the sampler's filter by its definition, with the whole
// vocabulary sorted (the implementation before session 17): the tokens
// drawn from and their probabilities.
func refFiltered(logits []float32, o SampleOptions) map[int]float64 {
	idx, prob, total := sortFiltered(logits, o)
	out := map[int]float64{}
	for i, id := range idx {
		out[id] = prob[i] / total
	}
	return out
}

// sortFiltered is refFiltered's tokens (most likely first) and weights,
// and the weights' sum.
func sortFiltered(logits []float32, o SampleOptions) ([]int, []float64, float64) {
	var idx []int
	for i, l := range logits {
		if !math.IsInf(float64(l), -1) {
			idx = append(idx, i)
		}
	}
	sort.Slice(idx, func(a, b int) bool {
		la, lb := logits[idx[a]], logits[idx[b]]
		return la > lb || (la == lb && idx[a] < idx[b])
	})
	if o.TopK > 0 && o.TopK < len(idx) {
		idx = idx[:o.TopK]
	}
	maxL := float64(logits[idx[0]])
	var prob []float64
	var sum float64
	for _, i := range idx {
		p := math.Exp((float64(logits[i]) - maxL) / o.Temperature)
		prob = append(prob, p)
		sum += p
	}
	n := len(prob)
	if o.MinP > 0 {
		for n > 1 && prob[n-1] < o.MinP*prob[0] {
			n--
		}
	}
	if o.TopP > 0 && o.TopP < 1 {
		var acc float64
		for i := 0; i < n; i++ {
			acc += prob[i] / sum
			if acc >= o.TopP {
				n = i + 1
				break
			}
		}
	}
	var total float64
	for _, p := range prob[:n] {
		total += p
	}
	return idx[:n], prob[:n], total
}

// TestSamplerFilteredMatchesSort checks filtered (top-k by a heap, min-p
// and top-p by thresholds) against the whole-vocabulary sort on realistic
// random logits: the same tokens with the same probabilities, in the
// sorted order wherever top-k or top-p takes tokens by rank; with ties,
// tokens masked to -Inf, and every combination of the filters.
func TestSamplerFilteredMatchesSort(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 1))
	const vocab = 5003
	for trial := range 12 {
		logits := make([]float32, vocab)
		for i := range logits {
			logits[i] = float32(r.NormFloat64() * 2.5)
		}
		for range 3 { // a few confident tokens, as a model's row has
			logits[r.IntN(vocab)] = float32(8 + 6*r.Float64())
		}
		if trial%3 == 1 { // ties: logits on a coarse grid
			for i := range logits {
				logits[i] = float32(math.Round(float64(logits[i])*2) / 2)
			}
		}
		if trial%4 == 2 { // a constraint's mask
			for i := range logits {
				if r.IntN(3) == 0 {
					logits[i] = float32(math.Inf(-1))
				}
			}
		}
		for _, temp := range []float64{0.3, 1, 1.7} {
			for _, k := range []int{0, 1, 7, 64, vocab - 1, vocab + 5} {
				for _, p := range []float64{0, 0.05, 0.5, 0.9, 0.999, 1} {
					for _, minP := range []float64{0, 0.02, 0.3} {
						o := SampleOptions{Temperature: temp, TopK: k, TopP: p, MinP: minP}
						want := refFiltered(logits, o)
						s := NewSampler(o)
						ids, w, total := s.filtered(append([]float32(nil), logits...))
						name := fmt.Sprintf("trial %d %+v", trial, o)
						if ids == nil { // the whole vocabulary by id, masked tokens weighing 0
							if len(w) != vocab {
								t.Fatalf("%s: %d weights for the whole vocabulary, want %d", name, len(w), vocab)
							}
							var nw []float64
							for id, x := range w {
								if x != 0 {
									ids = append(ids, id)
									nw = append(nw, x)
								} else if _, ok := want[id]; ok {
									t.Fatalf("%s: token %d weighs 0, want %g", name, id, want[id])
								}
							}
							w = nw
						}
						if len(ids) != len(want) || len(w) != len(ids) {
							t.Fatalf("%s: %d tokens, want %d", name, len(ids), len(want))
						}
						for j, id := range ids {
							pw, ok := want[id]
							if !ok {
								t.Fatalf("%s: token %d drawn from, not in the reference's set", name, id)
							}
							if got := w[j] / total; math.Abs(got-pw) > 1e-12*math.Max(pw, 1e-3) {
								t.Fatalf("%s: token %d probability %.17g, want %.17g", name, id, got, pw)
							}
						}
						finite := 0
						for _, l := range logits {
							if !math.IsInf(float64(l), -1) {
								finite++
							}
						}
						ranked := (k > 0 && k < finite) || (p > 0 && p < 1)
						for j := 1; ranked && j < len(ids); j++ {
							a, b := ids[j-1], ids[j]
							if logits[a] < logits[b] || (logits[a] == logits[b] && a > b) {
								t.Fatalf("%s: tokens %d and %d out of rank order", name, a, b)
							}
						}
					}
				}
			}
		}
	}
}

// TestSamplerChoose checks the draw's walk: u falls on the token whose
// slice of [0, total) holds u*total.
func TestSamplerChoose(t *testing.T) {
	ids, w := []int{9, 4, 7}, []float64{1, 2, 1}
	for _, c := range []struct {
		u    float64
		want int
	}{{0, 9}, {0.2499, 9}, {0.25, 4}, {0.7499, 4}, {0.75, 7}, {0.9999999, 7}} {
		if got := choose(ids, w, 4, c.u); got != c.want {
			t.Errorf("u %g: token %d, want %d", c.u, got, c.want)
		}
	}
	// The whole vocabulary by id: token 1 masked (weight 0) is never drawn.
	for _, c := range []struct {
		u    float64
		want int
	}{{0, 0}, {0.3332, 0}, {0.3334, 2}, {0.9999, 2}} {
		if got := choose(nil, []float64{1, 0, 2}, 3, c.u); got != c.want {
			t.Errorf("whole vocabulary, u %g: token %d, want %d", c.u, got, c.want)
		}
	}
}

// BenchmarkSample128K times one sampled token over a Llama-3-sized
// vocabulary (128,256 logits, a model-like row) for the OpenAI defaults
// (temperature 1, nothing filtered), top-p 0.9, top-k 40 and min-p 0.05;
// "sort" is the whole-vocabulary sort this sampler used before session 17.
func BenchmarkSample128K(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	logits := make([]float32, 128256)
	for i := range logits {
		logits[i] = float32(r.NormFloat64() * 2.5)
	}
	for range 8 {
		logits[r.IntN(len(logits))] = float32(12 + 6*r.Float64())
	}
	row := make([]float32, len(logits))
	for _, c := range []struct {
		name string
		o    SampleOptions
	}{
		{"t1", SampleOptions{Temperature: 1}},
		{"topp0.9", SampleOptions{Temperature: 0.8, TopP: 0.9}},
		{"topk40", SampleOptions{Temperature: 0.8, TopK: 40}},
		{"minp0.05", SampleOptions{Temperature: 1, MinP: 0.05}},
	} {
		b.Run(c.name, func(b *testing.B) {
			s := NewSampler(c.o)
			for b.Loop() {
				copy(row, logits)
				s.Sample(row, nil)
			}
		})
		b.Run(c.name+"/sort", func(b *testing.B) {
			for b.Loop() {
				copy(row, logits)
				idx, w, total := sortFiltered(row, c.o)
				_ = choose(idx, w, total, 0.5)
			}
		})
	}
}
