package backend

// Tensor-parallel groups: several backends of one device kind (one per GPU,
// or CPU ranks in tests) that run one model together, and the collective
// that sums their partial results. backend/tp builds a Backend over a group;
// a device opens the group (Device.OpenGroup) because only it knows how its
// ranks talk (NCCL for the cuda device, host copies for the CPU).

import (
	"errors"
	"fmt"
	"io"
)

// Communicator sums tensors across the ranks of a tensor-parallel group.
// Rank r is the r-th backend OpenGroup returned.
type Communicator interface {
	// Ranks returns the number of ranks in the group.
	Ranks() int
	// AllReduce replaces every parts[r], an F32 tensor of rank r's backend,
	// with the elementwise float32 sum of all parts. The parts have equal
	// shapes. Like an op it is queued on each rank's stream after the ops
	// issued before it: it returns once queued, and a failure while it runs
	// is recorded on the ranks' backends (Err, Sync). It returns an error at
	// once for arguments that do not fit (a part of another backend, shapes
	// that differ), and after a failed collective (the group is unusable).
	AllReduce(parts []Tensor) error
	// Close releases the communicator; the ranks' backends stay open.
	Close() error
}

// ErrNoGroup is returned (wrapped) by OpenGroup for a device that cannot
// open a tensor-parallel group.
var ErrNoGroup = errors.New("backend: device has no tensor-parallel groups")

// OpenGroup resolves choice (ResolveDevice) and opens n backends on it, one
// per rank (ranks on GPUs 0..n-1 for the cuda device), and the communicator
// between them. o.Ordinal is ignored. It returns the ranks, the
// communicator and the device's name.
func OpenGroup(choice string, n int, o OpenOptions, log io.Writer) ([]Backend, Communicator, string, error) {
	if n < 1 {
		return nil, nil, "", fmt.Errorf("backend: tensor-parallel group of %d ranks: want at least 1", n)
	}
	name, err := ResolveDevice(choice, log)
	if err != nil {
		return nil, nil, "", err
	}
	d := registered(name)
	if d.OpenGroup == nil {
		return nil, nil, "", fmt.Errorf("--device %s: %w", name, ErrNoGroup)
	}
	ranks, comm, err := d.OpenGroup(n, o)
	if err != nil {
		return nil, nil, "", fmt.Errorf("--device %s --tp %d: %w", name, n, err)
	}
	return ranks, comm, name, nil
}

// HostCommunicator is the Communicator of ranks that share the host's
// memory, and the reference of every other: AllReduce downloads each part,
// sums them in rank order in float32 and uploads the sum to every rank. It
// waits for each rank's queued ops (Download does), so it suits the CPU
// backend and tests, not speed.
type HostCommunicator struct {
	ranks []Backend
	sum   []float32 // the running sum, reused
	part  []float32 // one rank's part, reused
}

// NewHostCommunicator returns the host communicator of ranks.
func NewHostCommunicator(ranks []Backend) *HostCommunicator {
	return &HostCommunicator{ranks: ranks}
}

// Ranks implements Communicator.
func (c *HostCommunicator) Ranks() int { return len(c.ranks) }

// AllReduce implements Communicator.
func (c *HostCommunicator) AllReduce(parts []Tensor) error {
	if len(parts) != len(c.ranks) {
		return fmt.Errorf("backend: all-reduce of %d parts over %d ranks", len(parts), len(c.ranks))
	}
	n := NumElements(parts[0].Shape())
	for r, p := range parts {
		if p.DType() != F32 || NumElements(p.Shape()) != n {
			return fmt.Errorf("backend: all-reduce: rank %d's part is %v %v, rank 0's F32 %v", r, p.DType(), p.Shape(), parts[0].Shape())
		}
	}
	if cap(c.sum) < n {
		c.sum, c.part = make([]float32, n), make([]float32, n)
	}
	sum, part := c.sum[:n], c.part[:n]
	for r, p := range parts {
		dst := part
		if r == 0 {
			dst = sum
		}
		if err := c.ranks[r].Download(dst, p); err != nil {
			return fmt.Errorf("backend: all-reduce: rank %d: %w", r, err)
		}
		if r > 0 {
			for i, x := range part {
				sum[i] += x
			}
		}
	}
	for r, p := range parts {
		if err := c.ranks[r].Upload(p, sum); err != nil {
			return fmt.Errorf("backend: all-reduce: rank %d: %w", r, err)
		}
	}
	return nil
}

// Close implements Communicator.
func (c *HostCommunicator) Close() error { return nil }
