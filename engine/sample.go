package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

	"github.com/bitdecode/bitdecode/constrain"
	"github.com/bitdecode/bitdecode/model"
)

// SampleOptions configure next-token sampling. The zero value is greedy.
type SampleOptions struct {
	// Temperature divides the logits; 0 means greedy (argmax).
	Temperature float64
	// TopK keeps the K most likely tokens (0: all).
	TopK int
	// TopP keeps the smallest set of tokens whose probability reaches P (0 or 1: all).
	TopP float64
	// MinP drops tokens less likely than MinP times the most likely one (0: none).
	MinP float64
	// RepeatPenalty divides positive logits (multiplies negative ones) of
	// tokens already in the context, as llama.cpp and transformers do (1 or 0: off).
	RepeatPenalty float64
	// PresencePenalty is subtracted from the logit of every token already
	// generated, FrequencyPenalty times the number of times it was
	// generated, as the OpenAI API defines them (0: off; the prompt does
	// not count).
	PresencePenalty, FrequencyPenalty float64
	// LogitBias is added to the logits of the tokens it names before
	// sampling (OpenAI's logit_bias: -100 bans a token, 100 forces it).
	LogitBias map[int]float64
	// TopLogprobs, with Logprobs, is how many of the most likely tokens'
	// log probabilities Sample reports besides the chosen one's (0-20).
	TopLogprobs int
	// Logprobs makes the sampler report the chosen token's log probability
	// (SampleLogprob).
	Logprobs bool
	// Seed seeds the sampler; runs with the same seed give the same tokens.
	Seed uint64
}

// Validate checks the options' ranges.
func (o SampleOptions) Validate() error {
	switch {
	case o.Temperature < 0 || math.IsNaN(o.Temperature):
		return fmt.Errorf("engine: temperature %g must be >= 0", o.Temperature)
	case o.TopK < 0:
		return fmt.Errorf("engine: top-k %d must be >= 0", o.TopK)
	case o.TopP < 0 || o.TopP > 1:
		return fmt.Errorf("engine: top-p %g must be in [0, 1]", o.TopP)
	case o.MinP < 0 || o.MinP > 1:
		return fmt.Errorf("engine: min-p %g must be in [0, 1]", o.MinP)
	case o.RepeatPenalty < 0 || math.IsNaN(o.RepeatPenalty):
		return fmt.Errorf("engine: repeat penalty %g must be >= 0", o.RepeatPenalty)
	case !(o.PresencePenalty >= -2 && o.PresencePenalty <= 2):
		return fmt.Errorf("engine: presence penalty %g must be in [-2, 2]", o.PresencePenalty)
	case !(o.FrequencyPenalty >= -2 && o.FrequencyPenalty <= 2):
		return fmt.Errorf("engine: frequency penalty %g must be in [-2, 2]", o.FrequencyPenalty)
	case o.TopLogprobs < 0 || o.TopLogprobs > MaxTopLogprobs:
		return fmt.Errorf("engine: top logprobs %d must be in [0, %d]", o.TopLogprobs, MaxTopLogprobs)
	}
	for id, b := range o.LogitBias {
		if id < 0 || !(b >= -100 && b <= 100) {
			return fmt.Errorf("engine: logit bias %g for token %d: want a token id >= 0 and a bias in [-100, 100]", b, id)
		}
	}
	return nil
}

// MaxTopLogprobs is the most alternatives SampleOptions.TopLogprobs may ask
// for (the OpenAI API's limit).
const MaxTopLogprobs = 20

// TokenLogprob is a token with its log probability under the model: the
// log-softmax of the raw logits, before penalties, bias and temperature (as
// vLLM reports them by default).
type TokenLogprob struct {
	ID      int
	Logprob float64
}

// SampledToken is a sampled token with, when asked for, its log
// probability and the most likely alternatives'.
type SampledToken struct {
	TokenLogprob
	// Top holds the TopLogprobs most likely tokens, most likely first (ties
	// by id).
	Top []TokenLogprob
}

// Sampler picks next tokens from logits.
type Sampler struct {
	opts SampleOptions
	rng  *rand.Rand
	idx  []int
	prob []float64
}

// NewSampler returns a sampler with options o.
func NewSampler(o SampleOptions) *Sampler {
	return &Sampler{opts: o, rng: rand.New(rand.NewPCG(o.Seed, 0x9e3779b97f4a7c15))}
}

// Sample returns the next token for logits, given the context so far (for
// the repetition penalty). logits is modified.
func (s *Sampler) Sample(logits []float32, context []int) int {
	return s.SampleLogprob(logits, context, 0).ID
}

// SampleLogprob is Sample that also reports log probabilities when the
// options ask for them. generated is how many tokens at the end of context
// were generated (the ones presence and frequency penalties count).
func (s *Sampler) SampleLogprob(logits []float32, context []int, generated int) SampledToken {
	o := s.opts
	var lp []float64
	if o.Logprobs {
		lp = logSoftmax(logits)
	}
	s.penalize(logits, context, generated)
	id := s.pick(logits)
	out := SampledToken{TokenLogprob: TokenLogprob{ID: id}}
	if lp != nil {
		out.Logprob = lp[id]
		out.Top = topLogprobs(lp, o.TopLogprobs)
	}
	return out
}

// Output returns what SampleLogprob needs of the next row of logits, given
// how many tokens at the end of the context were generated: its greedy
// token alone (model.OutputToken) where it would return Argmax of the raw
// row (temperature 0; no log probabilities; no repetition penalty, no
// presence or frequency penalty that applies yet, no logit bias), the
// whole row otherwise. Forward can then skip copying the row to the host
// (docs/perf/decode-step.md v23).
func (s *Sampler) Output(generated int) model.Output {
	o := s.opts
	greedy := o.Temperature == 0 && !o.Logprobs && !o.repeatPenalized() && !o.countPenalized(generated) && len(o.LogitBias) == 0
	if greedy {
		return model.OutputToken
	}
	return model.OutputLogits
}

// SampleRow is SampleLogprob of output row i of l, whose sequence asked
// Forward for Output(generated): the row's greedy token where that is all
// the sampler needs (the same token SampleLogprob would pick from the
// row), else SampleLogprob of the row (which it modifies).
func (s *Sampler) SampleRow(l *model.Logits, i int, context []int, generated int) SampledToken {
	if s.Output(generated) == model.OutputToken {
		return SampledToken{TokenLogprob: TokenLogprob{ID: l.Token(i)}}
	}
	row := l.Row(i)
	if row == nil { // the batch asked for the token alone: a caller's bug, never a silent token 0
		panic(fmt.Sprintf("engine: SampleRow: row %d came back as its token only, but this sampler needs the whole row", i))
	}
	return s.SampleLogprob(row, context, generated)
}

// repeatPenalized reports whether penalize applies the repetition penalty.
func (o *SampleOptions) repeatPenalized() bool { return o.RepeatPenalty > 0 && o.RepeatPenalty != 1 }

// countPenalized reports whether penalize applies the presence and
// frequency penalties after generated tokens of the sequence.
func (o *SampleOptions) countPenalized(generated int) bool {
	return (o.PresencePenalty != 0 || o.FrequencyPenalty != 0) && generated > 0
}

// penalize applies to logits, in this order, the repetition penalty (over
// the whole context), the presence and frequency penalties (over the
// generated tokens) and the logit bias.
func (s *Sampler) penalize(logits []float32, context []int, generated int) {
	o := s.opts
	if o.repeatPenalized() {
		seen := map[int]bool{}
		for _, t := range context {
			if t >= 0 && t < len(logits) && !seen[t] {
				seen[t] = true
				if logits[t] > 0 {
					logits[t] /= float32(o.RepeatPenalty)
				} else {
					logits[t] *= float32(o.RepeatPenalty)
				}
			}
		}
	}
	if o.countPenalized(generated) {
		counts := map[int]int{}
		for _, t := range context[max(0, len(context)-generated):] {
			counts[t]++
		}
		for t, n := range counts {
			if t >= 0 && t < len(logits) {
				logits[t] -= float32(o.PresencePenalty + o.FrequencyPenalty*float64(n))
			}
		}
	}
	for t, b := range o.LogitBias {
		if t < len(logits) {
			logits[t] += float32(b)
		}
	}
}

// pick samples from the processed logits: argmax at temperature 0, else
// from the top-k / min-p / top-p filtered softmax.
func (s *Sampler) pick(logits []float32) int {
	o := s.opts
	if o.Temperature == 0 {
		return model.Argmax(logits)
	}
	// Candidates sorted by logit (ties by id, so the order is deterministic),
	// those masked out (-Inf: a constraint's) left out.
	s.idx = s.idx[:0]
	for i, l := range logits {
		if !math.IsInf(float64(l), -1) {
			s.idx = append(s.idx, i)
		}
	}
	if len(s.idx) == 0 {
		return model.Argmax(logits)
	}
	sort.Slice(s.idx, func(a, b int) bool {
		la, lb := logits[s.idx[a]], logits[s.idx[b]]
		return la > lb || (la == lb && s.idx[a] < s.idx[b])
	})
	if o.TopK > 0 && o.TopK < len(s.idx) {
		s.idx = s.idx[:o.TopK]
	}
	maxL := float64(logits[s.idx[0]])
	s.prob = s.prob[:0]
	var sum float64
	for _, i := range s.idx {
		p := math.Exp((float64(logits[i]) - maxL) / o.Temperature)
		s.prob = append(s.prob, p)
		sum += p
	}
	n := len(s.prob)
	if o.MinP > 0 {
		for n > 1 && s.prob[n-1] < o.MinP*s.prob[0] {
			n--
		}
	}
	if o.TopP > 0 && o.TopP < 1 {
		var acc float64
		for i := 0; i < n; i++ {
			acc += s.prob[i] / sum
			if acc >= o.TopP {
				n = i + 1
				break
			}
		}
	}
	var total float64
	for _, p := range s.prob[:n] {
		total += p
	}
	r := s.rng.Float64() * total
	for i, p := range s.prob[:n] {
		if r < p {
			return s.idx[i]
		}
		r -= p
	}
	return s.idx[n-1]
}

// logSoftmax returns log-softmax(x) in float64.
func logSoftmax(x []float32) []float64 { return logSoftmaxInto(nil, x) }

// logSoftmaxInto is logSoftmax into dst's storage when it is large enough.
func logSoftmaxInto(dst []float64, x []float32) []float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = math.Max(m, float64(v))
	}
	var sum float64
	for _, v := range x {
		sum += math.Exp(float64(v) - m)
	}
	lse := m + math.Log(sum)
	out := dst[:0]
	if cap(out) < len(x) {
		out = make([]float64, len(x))
	}
	out = out[:len(x)]
	for i, v := range x {
		out[i] = float64(v) - lse
	}
	return out
}

// topLogprobs returns the n largest entries of lp, largest first, ties by
// id.
func topLogprobs(lp []float64, n int) []TokenLogprob {
	if n <= 0 {
		return nil
	}
	top := make([]TokenLogprob, 0, n+1)
	for id, v := range lp {
		if math.IsInf(v, -1) { // masked out by a constraint
			continue
		}
		if len(top) == n && !(v > top[n-1].Logprob) {
			continue
		}
		i := len(top)
		for i > 0 && v > top[i-1].Logprob {
			i--
		}
		top = append(top, TokenLogprob{})
		copy(top[i+1:], top[i:])
		top[i] = TokenLogprob{ID: id, Logprob: v}
		if len(top) > n {
			top = top[:n]
		}
	}
	return top
}

// greedyTries is how many of the most likely tokens a greedy constrained
// step tests one by one before it computes the whole mask.
const greedyTries = 16

// SampleConstrained is SampleLogprob restricted to the tokens matcher m
// allows next; false if it allows none. The mask comes first, then
// penalties, temperature and the top-k, top-p and min-p filters, over the
// allowed tokens exactly as over all of them unconstrained (vLLM's order).
// A greedy step without log probabilities tests the most likely tokens
// one at a time and takes the first allowed (the whole mask only after
// greedyTries refusals). Log probabilities are those of the masked
// distribution: the log-softmax of the raw logits over the allowed tokens.
// logits is modified; m is not advanced.
func (s *Sampler) SampleConstrained(logits []float32, context []int, generated int, m *constrain.Matcher) (SampledToken, bool) {
	o := s.opts
	negInf := float32(math.Inf(-1))
	if o.Temperature == 0 && !o.Logprobs {
		s.penalize(logits, context, generated)
		for range greedyTries {
			id := model.Argmax(logits)
			if math.IsInf(float64(logits[id]), -1) {
				return SampledToken{}, false
			}
			if m.Allowed(id) {
				return SampledToken{TokenLogprob: TokenLogprob{ID: id}}, true
			}
			logits[id] = negInf
		}
		if !applyMask(logits, m.Mask()) {
			return SampledToken{}, false
		}
		return SampledToken{TokenLogprob: TokenLogprob{ID: model.Argmax(logits)}}, true
	}
	if !applyMask(logits, m.Mask()) {
		return SampledToken{}, false
	}
	return s.SampleLogprob(logits, context, generated), true
}

// applyMask sets the logits of the tokens outside mask to -Inf and reports
// whether any token is left.
func applyMask(logits []float32, mask []uint64) bool {
	negInf := float32(math.Inf(-1))
	left := false
	for i := range logits {
		if !constrain.Has(mask, i) {
			logits[i] = negInf
		} else if !math.IsInf(float64(logits[i]), -1) {
			left = true
		}
	}
	return left
}
