package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
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
	case o.RepeatPenalty < 0:
		return fmt.Errorf("engine: repeat penalty %g must be >= 0", o.RepeatPenalty)
	}
	return nil
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
	o := s.opts
	if o.RepeatPenalty > 0 && o.RepeatPenalty != 1 {
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
	if o.Temperature == 0 {
		best := 0
		for i, x := range logits {
			if x > logits[best] {
				best = i
			}
		}
		return best
	}
	// Candidates sorted by logit (ties by id, so the order is deterministic).
	s.idx = s.idx[:0]
	for i := range logits {
		s.idx = append(s.idx, i)
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
