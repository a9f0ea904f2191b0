package gpu

import (
	"errors"

	"github.com/bitdecode/bitdecode/backend"
)

// OpenGroup opens n backends on GPUs 0..n-1 with the options o and an NCCL
// communicator between them (tensor parallelism, backend/tp).
//
// STUB: lands with issue #23.
func OpenGroup(n int, o Options) ([]*Backend, backend.Communicator, error) {
	return nil, nil, errors.New("gpu: tensor-parallel groups: not implemented")
}
