package backend

// How a model's weights split over the ranks of a tensor-parallel group
// (backend/tp): the model names each weight's role (Split), and the loader
// hands it to a backend that shards (SplitLoader and its quantized and
// random counterparts). A backend without these interfaces gets LoadWeight
// and the others as before.

import (
	"errors"
	"fmt"

	"github.com/bitdecode/bitdecode/wq"
)

// SplitKind says along which dimension a weight is divided between ranks.
type SplitKind int

// The split kinds (Megatron's layout). A Linear with a Rows weight on a
// replicated input gives each rank its own output columns; a Cols weight
// takes those columns and gives each rank a partial sum of the full output,
// which the group all-reduces.
const (
	// Replicated weights are whole on every rank (norms, the biases of Cols
	// layers, RoPE frequencies).
	Replicated SplitKind = iota
	// Rows splits the N (output) rows of a [N, K] weight, or a bias [N], in
	// equal blocks of units (q, k, v, gate, up and their biases).
	Rows
	// Cols splits the K (input) columns of a [N, K] weight in equal blocks
	// of units (o, down).
	Cols
	// Vocab splits the rows of an embedding or LM head [V, K] into ranges
	// that may be uneven (V need not divide by the ranks).
	Vocab
)

// String names the kind as the model's tp struct tag does.
func (k SplitKind) String() string {
	switch k {
	case Replicated:
		return "replicated"
	case Rows:
		return "rows"
	case Cols:
		return "cols"
	case Vocab:
		return "vocab"
	}
	return fmt.Sprintf("SplitKind(%d)", int(k))
}

// Split is how one weight divides between ranks.
type Split struct {
	Kind SplitKind
	// Unit is the elements of the split dimension that stay together, the
	// head dimension D for weights split by attention head; 0 or 1: single
	// rows or columns. The dimension must hold a whole number of units, and
	// the units must divide evenly by the ranks (Rows, Cols).
	Unit int
	// Replicate allows fewer units than ranks (KV heads under GQA): when the
	// ranks are a multiple of the units, rank r holds unit r·units/ranks,
	// each unit on ranks/units ranks.
	Replicate bool
	// What names the units in errors ("query heads", "KV heads").
	What string
}

// Range is the part [Start, Start+N) of a split dimension that one rank
// holds.
type Range struct{ Start, N int }

// ErrSplit is wrapped by the errors of weights that cannot split over the
// group's ranks (the numbers are in the message).
var ErrSplit = errors.New("cannot split over the tensor-parallel ranks")

// Ranges returns, for a split dimension of dim elements over ranks ranks,
// the part each rank holds, or an error naming the numbers.
func (s Split) Ranges(dim, ranks int) ([]Range, error) {
	if ranks < 1 || dim < 1 {
		return nil, fmt.Errorf("%w: a dimension of %d over %d ranks", ErrSplit, dim, ranks)
	}
	out := make([]Range, ranks)
	if s.Kind == Replicated {
		for r := range out {
			out[r] = Range{0, dim}
		}
		return out, nil
	}
	if s.Kind == Vocab {
		// Uneven: the first dim%ranks ranks hold one row more.
		q, rem := dim/ranks, dim%ranks
		start := 0
		for r := range out {
			n := q
			if r < rem {
				n++
			}
			if n == 0 {
				return nil, fmt.Errorf("%w: a vocabulary of %d rows over %d ranks leaves rank %d none", ErrSplit, dim, ranks, r)
			}
			out[r] = Range{start, n}
			start += n
		}
		return out, nil
	}
	unit, what := max(s.Unit, 1), s.What
	if what == "" {
		what = "rows"
		if s.Kind == Cols {
			what = "columns"
		}
	}
	if dim%unit != 0 {
		return nil, fmt.Errorf("%w: %d elements are not whole %s of %d", ErrSplit, dim, what, unit)
	}
	units := dim / unit
	switch {
	case units%ranks == 0:
		per := units / ranks
		for r := range out {
			out[r] = Range{r * per * unit, per * unit}
		}
	case s.Replicate && ranks%units == 0:
		for r := range out {
			out[r] = Range{r * units / ranks * unit, unit}
		}
	case s.Replicate:
		return nil, fmt.Errorf("%w: %d %s over %d ranks: want a multiple of %d, or a divisor of %d (each then replicated)", ErrSplit, units, what, ranks, ranks, ranks)
	default:
		return nil, fmt.Errorf("%w: %d %s over %d ranks: want a multiple of %d", ErrSplit, units, what, ranks, ranks)
	}
	return out, nil
}

// SplitLoader is implemented by backends that shard weights (backend/tp).
// The model loader calls it instead of LoadWeight for every weight, with
// the split its model names; Replicated weights go whole to every rank.
type SplitLoader interface {
	// LoadWeightSplit is LoadWeight of the logical weight [shape] whose
	// ranks each keep their part of s: the data of every rank's part is
	// read from data (a rows part is a slice of it, no copy), and data is
	// not kept after it returns.
	LoadWeightSplit(name string, dtype DType, shape []int, data []byte, s Split) (Weight, error)
}

// QuantSplitLoader is QuantWeightLoader for backends that shard weights: a
// Rows split slices m by rows, a Cols split by input channels on group
// boundaries. DEC is refused over more than one rank.
type QuantSplitLoader interface {
	// LoadQuantWeightSplit is LoadQuantWeight of m, split by s.
	LoadQuantWeightSplit(name string, m *wq.Matrix, dec *wq.DEC, s Split) (Weight, error)
}

// ErrNoRandom is returned (wrapped) by LoadRandomSplit when the ranks cannot
// make random weights themselves: the caller then makes host data and calls
// LoadWeightSplit.
var ErrNoRandom = errors.New("backend: the ranks make no random weights")

// RandomSplitLoader is RandomLoader for backends that shard weights: each
// rank makes the random values of its part's shape.
type RandomSplitLoader interface {
	// LoadRandomSplit is LoadRandom of the logical [N, K] weight split by s.
	LoadRandomSplit(name string, shape []int, std float32, seed uint64, s Split) (Weight, error)
}

// RandomQuantSplitLoader is RandomQuantLoader for backends that shard
// weights.
type RandomQuantSplitLoader interface {
	// LoadRandomQuantSplit is LoadRandomQuant of the logical [N, K] weight
	// split by s.
	LoadRandomQuantSplit(name string, shape []int, e wq.Elem, G int, seed uint64, dec wq.DEC, s Split) (Weight, error)
}
