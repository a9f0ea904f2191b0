package gpu

// Waiting for a stream from code that runs on the owner thread (a cache's
// Do or Enqueue), bounded on a rank of a tensor-parallel group.

import "github.com/bitdecode/bitdecode/gpu/cuda"

// SyncStream waits for stream s of b's device, called inside Do or an
// Enqueue'd function with its *cuda.Ctx. On a lone GPU it is
// cuStreamSynchronize. On a rank of a tensor-parallel group it polls, as the
// backend's own waits do: an NCCL error, a lost peer or a wait past the
// group's CollectiveTimeout fails the whole group with a message naming the
// rank, so a cache's wait can never hang on a collective that will not
// finish.
func (b *Backend) SyncStream(x *cuda.Ctx, s cuda.Stream) error {
	if b.group != nil {
		return b.group.wait(x, b.rank, s)
	}
	return x.SyncStream(s)
}
