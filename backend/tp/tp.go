// Package tp runs one model over the ranks of a tensor-parallel group
// (Megatron-style): each rank holds a shard of every weight, attention heads
// and the KV cache are split by head, and the partial results of the
// row-split projections are summed with the group's Communicator.
//
// STUB: the API the engine, the benchmarks and the caches build on; the
// implementation lands with issue #23.
package tp

import (
	"errors"

	"github.com/bitdecode/bitdecode/backend"
)

// Backend is a backend.Backend over a tensor-parallel group.
type Backend struct {
	ranks []backend.Backend
	comm  backend.Communicator
}

// New returns the backend that runs one model over ranks, summing partial
// results with comm. The Backend owns neither: Close closes comm and then
// the ranks.
func New(ranks []backend.Backend, comm backend.Communicator) (*Backend, error) {
	return nil, errors.New("tp: not implemented")
}

// Ranks returns the ranks' backends, rank 0 first.
func (b *Backend) Ranks() []backend.Backend { return b.ranks }
