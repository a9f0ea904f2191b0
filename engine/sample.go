package engine

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

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
// from the top-k / min-p / top-p filtered softmax (filtered).
func (s *Sampler) pick(logits []float32) int {
	if s.opts.Temperature == 0 {
		return model.Argmax(logits)
	}
	ids, weights, total := s.filtered(logits)
	if len(weights) == 0 {
		return model.Argmax(logits)
	}
	return choose(ids, weights, total, s.rng.Float64())
}

// choose returns the token that u in [0, 1) falls on when the weights,
// in the order given, partition [0, total); nil ids means token j has
// weight j (the whole vocabulary in id order).
func choose(ids []int, weights []float64, total, u float64) int {
	id := func(j int) int {
		if ids == nil {
			return j
		}
		return ids[j]
	}
	r := u * total
	last := -1
	for j, w := range weights {
		if w == 0 { // a token masked to -Inf in the whole vocabulary
			continue
		}
		if r < w {
			return id(j)
		}
		r -= w
		last = j
	}
	return id(last)
}

// byLogit orders token ids by logit, largest first, ties by id: the order
// in which top-k and top-p take tokens.
func byLogit(logits []float32) func(a, b int) int {
	return func(a, b int) int {
		la, lb := logits[a], logits[b]
		switch {
		case la > lb:
			return -1
		case la < lb:
			return 1
		}
		return cmp.Compare(a, b)
	}
}

// nucleusStart is the first weight threshold (relative to the most likely
// token's 1) below which filtered looks for top-p's nucleus only when the
// tokens above it do not reach P; nucleusStep divides it each time.
const (
	nucleusStart = 1.0 / 1024
	nucleusStep  = 256
)

// filtered returns the tokens the sampler draws from and their weights
// exp((logit - max) / temperature), and the weights' sum: the TopK most
// likely tokens (ties by id), of those the ones whose weight is at least
// MinP times the largest, and of those the shortest run from the most
// likely one whose probability reaches TopP, the probability taken over
// the top-k tokens before min-p, as vLLM and llama.cpp do. Tokens at -Inf
// (masked by a constraint) are never drawn. The order is the walk's:
// most likely first where top-k or top-p sorted the tokens, by id where
// nothing needed an order (sorting a 128K vocabulary each step cost ~20
// ms; a selection or a threshold avoids it); ids is nil where every token
// is drawn from (weights by id, 0 for tokens at -Inf).
func (s *Sampler) filtered(logits []float32) (ids []int, weights []float64, total float64) {
	o := s.opts
	maxL, n := math.Inf(-1), 0
	for _, l := range logits {
		if !math.IsInf(float64(l), -1) {
			n++
			maxL = math.Max(maxL, float64(l))
		}
	}
	if n == 0 {
		return nil, nil, 0
	}
	weight := func(i int) float64 { return math.Exp((float64(logits[i]) - maxL) / o.Temperature) }
	order := byLogit(logits)
	topP := o.TopP > 0 && o.TopP < 1
	s.idx, s.prob = s.idx[:0], s.prob[:0]
	if o.TopK > 0 && o.TopK < n {
		s.idx = topK(s.idx, logits, o.TopK, order)
		var sum float64
		for _, i := range s.idx {
			w := weight(i)
			s.prob = append(s.prob, w)
			sum += w
		}
		k := len(s.idx)
		if o.MinP > 0 {
			for k > 1 && s.prob[k-1] < o.MinP*s.prob[0] {
				k--
			}
		}
		if topP {
			k = nucleus(s.prob[:k], sum, o.TopP)
		}
		return s.idx[:k], s.prob[:k], sumOf(s.prob[:k])
	}
	// No top-k: every weight once (the sum top-p is taken over), then
	// min-p and top-p by thresholds; only top-p's candidates are sorted.
	if cap(s.prob) < len(logits) {
		s.prob = make([]float64, len(logits))
	}
	w := s.prob[:len(logits)]
	var sum float64
	for i, l := range logits {
		w[i] = 0
		if !math.IsInf(float64(l), -1) {
			w[i] = weight(i)
			sum += w[i]
		}
	}
	keep := func(i int, min float64) bool { return w[i] >= min && !math.IsInf(float64(logits[i]), -1) }
	if !topP && o.MinP == 0 {
		return nil, w, sum
	}
	if !topP {
		for i := range logits {
			if keep(i, o.MinP) {
				s.idx = append(s.idx, i)
			}
		}
		// The weights in the ids' order, after w (which they may overwrite
		// only where already read: ids are increasing).
		ws := w[:0:len(w)]
		for _, i := range s.idx {
			ws = append(ws, w[i])
		}
		return s.idx, ws, sumOf(ws)
	}
	// The nucleus lies among the tokens of weight >= t once their run in
	// order reaches P: every other token weighs less than each of them.
	for t := math.Max(o.MinP, nucleusStart); ; t /= nucleusStep {
		if t < o.MinP || t < math.SmallestNonzeroFloat64*nucleusStep {
			t = o.MinP
		}
		s.idx = s.idx[:0]
		for i := range logits {
			if keep(i, t) {
				s.idx = append(s.idx, i)
			}
		}
		slices.SortFunc(s.idx, order)
		ws := make([]float64, len(s.idx))
		for j, i := range s.idx {
			ws[j] = w[i]
		}
		k := nucleus(ws, sum, o.TopP)
		if k < len(ws) || acc(ws, sum) >= o.TopP || t == o.MinP {
			return s.idx[:k], ws[:k], sumOf(ws[:k])
		}
	}
}

// nucleus returns how many of the weights, largest first, top-p keeps: the
// shortest run whose probability (weight / sum) reaches p, else all.
func nucleus(weights []float64, sum, p float64) int {
	var a float64
	for i, w := range weights {
		a += w / sum
		if a >= p {
			return i + 1
		}
	}
	return len(weights)
}

// acc is the probability of weights under sum, accumulated as nucleus does.
func acc(weights []float64, sum float64) float64 {
	var a float64
	for _, w := range weights {
		a += w / sum
	}
	return a
}

// sumOf returns the sum of w in order.
func sumOf(w []float64) float64 {
	var t float64
	for _, v := range w {
		t += v
	}
	return t
}

// topK returns in dst the k largest logits' ids (not -Inf) sorted by order,
// with a bounded heap over the vocabulary: O(V log k), not a whole sort.
func topK(dst []int, logits []float32, k int, order func(a, b int) int) []int {
	h := dst[:0]
	// h is a heap whose root is the worst of the k kept (order's last).
	worse := func(a, b int) bool { return order(a, b) > 0 }
	down := func(j int) {
		for {
			c := 2*j + 1
			if c >= len(h) {
				return
			}
			if c+1 < len(h) && worse(h[c+1], h[c]) {
				c++
			}
			if !worse(h[c], h[j]) {
				return
			}
			h[j], h[c] = h[c], h[j]
			j = c
		}
	}
	for i, l := range logits {
		if math.IsInf(float64(l), -1) {
			continue
		}
		if len(h) < k {
			h = append(h, i)
			for j := len(h) - 1; j > 0; {
				p := (j - 1) / 2
				if !worse(h[j], h[p]) {
					break
				}
				h[j], h[p] = h[p], h[j]
				j = p
			}
			continue
		}
		if order(i, h[0]) < 0 {
			h[0] = i
			down(0)
		}
	}
	slices.SortFunc(h, order)
	return h
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
