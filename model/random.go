package model

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/wq"
)

// RandomStd is the standard deviation of NewRandom's matrices: the scale of
// trained Llama projection weights (0.01-0.03).
const RandomStd = 0.02

// NewRandom builds a model of config cfg on be with random weights of
// realistic scale: matrices N(0, RandomStd²), norm weights 1, biases 0.
// Benchmarks use it for the shapes of checkpoints they do not have (an 8B
// model's decode step at long context). The same seed gives the same
// weights on the same backend. Backends that implement
// backend.RandomLoader fill matrices themselves; others get host data.
func NewRandom(cfg *Config, be backend.Backend, seed uint64) (Model, error) {
	return NewRandomWeights(cfg, be, seed, wq.Spec{Elem: wq.FP16}, nil)
}

// NewRandomWeights is NewRandom with the linear layers (not embeddings, LM
// head or norms) in weight format w: for an integer format, random packed
// matrices made by a backend.RandomQuantLoader (benchmarks of the format's
// speed; the values are only plausible). decFor, when not nil, gives each
// [N, K] linear layer its DEC (k_chunk, n_tb; random residuals), where the
// q, k and v of a layer take one choice (decByLayer).
func NewRandomWeights(cfg *Config, be backend.Backend, seed uint64, w wq.Spec, decFor func(N, K int) wq.DEC) (Model, error) {
	if decFor != nil && !w.IsQuantized() {
		return nil, fmt.Errorf("model: DEC needs quantized weights, not %s", w)
	}
	return newRandomModel(cfg, be, &randomSource{seed: seed, weights: w, decFor: decFor})
}

// NewRandomWeightsAlloc is NewRandomWeights with DEC by projection: each
// linear layer of a kind alloc names gets its k_chunk (random residuals),
// the others none; q, k and v keep their own (DECAlloc).
func NewRandomWeightsAlloc(cfg *Config, be backend.Backend, seed uint64, w wq.Spec, alloc DECAlloc) (Model, error) {
	if err := alloc.Check(cfg); err != nil {
		return nil, err
	}
	if alloc.On() && !w.IsQuantized() {
		return nil, fmt.Errorf("model: DEC (%s) needs quantized weights, not %s", alloc, w)
	}
	return newRandomModel(cfg, be, &randomSource{seed: seed, weights: w, alloc: alloc})
}

// newRandomModel makes cfg's model over be with src's random weights: the
// family's constructor, a backend that makes packed weights where src's
// format is an integer one, and padded heads (backend.HeadDimPadder) with
// random weights of the padded shapes: the work of the model Load would
// build, not its zeros.
func newRandomModel(cfg *Config, be backend.Backend, src *randomSource) (Model, error) {
	newModel, ok := families[cfg.ModelType]
	if !ok {
		return nil, fmt.Errorf("model: %w %q; supported: %s", ErrUnsupportedArchitecture, cfg.ModelType, supportedList())
	}
	if w := src.weights; w.IsQuantized() {
		_, split := be.(backend.RandomQuantSplitLoader)
		if _, ok := be.(backend.RandomQuantLoader); !ok && !split {
			return nil, fmt.Errorf("model: random %s weights need a backend that makes packed weights (the CUDA backend)", w)
		}
	}
	cfg, err := padHeads(cfg, be, 0)
	if err != nil {
		return nil, err
	}
	return newModel(cfg, &loader{be: be, random: src})
}

// randomSource makes NewRandom's weights.
type randomSource struct {
	seed    uint64
	weights wq.Spec               // the linear layers' format (and the head's: wq.Spec.Head)
	decFor  func(N, K int) wq.DEC // DEC per linear shape, or nil
	alloc   DECAlloc              // DEC per projection (instead of decFor), or nil
}

func (r *randomSource) load(be backend.Backend, specs []weightSpec) error {
	rl, devFill := be.(backend.RandomLoader)
	rs, splitFill := be.(backend.RandomSplitLoader)
	sl, splitting := be.(backend.SplitLoader)
	var decNamed map[string]DECChoice
	if r.alloc != nil {
		decNamed = decByKind(specs, r.alloc)
	} else if r.decFor != nil {
		decNamed = decByLayer(specs, func(N, K int) DECChoice {
			d := r.decFor(N, K)
			return DECChoice{KChunk: d.KChunk, Blocks: d.Blocks}
		})
	}
	_, rq := be.(backend.RandomQuantLoader)
	headQ := r.weights.HeadQuantized() && rq && !splitting
	for i, s := range specs {
		seed := r.seed*0x9e3779b97f4a7c15 + uint64(i)
		var w backend.Weight
		var err error
		hostData := false
		switch {
		case s.linear && r.weights.IsQuantized():
			var dec wq.DEC
			if c, ok := decNamed[s.name]; ok {
				dec = wq.DEC{KChunk: c.KChunk, Blocks: c.Blocks}
			}
			if qs, ok := be.(backend.RandomQuantSplitLoader); ok {
				w, err = qs.LoadRandomQuantSplit(s.name, s.shape, r.weights.Elem, r.weights.Group, seed, dec, s.split)
			} else {
				w, err = be.(backend.RandomQuantLoader).LoadRandomQuant(s.name, s.shape, r.weights.Elem, r.weights.Group, seed, dec)
			}
		case s.head && headQ:
			h := r.weights.HeadSpec()
			w, err = be.(backend.RandomQuantLoader).LoadRandomQuant(s.name, s.shape, h.Elem, h.Group, seed, wq.DEC{})
		case len(s.shape) == 2 && splitFill:
			// A sharding backend whose ranks make no random weights takes
			// host data, split as any other weight: the same model as on
			// one rank.
			w, err = rs.LoadRandomSplit(s.name, s.shape, RandomStd, seed, s.split)
			hostData = errors.Is(err, backend.ErrNoRandom)
		case len(s.shape) == 2 && devFill:
			w, err = rl.LoadRandom(s.name, s.shape, RandomStd, seed)
		default:
			hostData = true
		}
		if hostData {
			if splitting {
				w, err = sl.LoadWeightSplit(s.name, backend.F32, s.shape, randomData(s.name, s.shape, seed), s.split)
			} else {
				w, err = be.LoadWeight(s.name, backend.F32, s.shape, randomData(s.name, s.shape, seed))
			}
		}
		if err != nil {
			return fmt.Errorf("model: random weight: %w", err)
		}
		*s.dst = w
	}
	return nil
}

// randomData returns float32 little-endian data for a weight: ones for
// norms, zeros for biases, N(0, RandomStd²) otherwise.
func randomData(name string, shape []int, seed uint64) []byte {
	n := backend.NumElements(shape)
	data := make([]byte, 4*n)
	rng := rand.New(rand.NewPCG(seed, 0x5851f42d4c957f2d))
	for i := range n {
		var v float32
		switch {
		case strings.Contains(name, "norm"):
			v = 1
		case strings.HasSuffix(name, ".bias"):
			v = 0
		default:
			v = float32(rng.NormFloat64() * RandomStd)
		}
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
	}
	return data
}
