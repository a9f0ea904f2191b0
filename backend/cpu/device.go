package cpu

import (
	"runtime"

	"github.com/bitdecode/bitdecode/backend"
)

func init() {
	backend.RegisterDevice(backend.Device{
		Name:      "cpu",
		Available: func() error { return nil },
		Configure: configure,
		Open: func(o backend.OpenOptions) (backend.Backend, error) {
			return New(o.Threads), nil
		},
		OpenGroup: openGroup,
	})
}

// openGroup opens n CPU backends that share the threads (o.Threads, or
// GOMAXPROCS) between them, at least one each, and the host communicator
// between them: tensor parallelism on one host's memory, for tests of the
// sharding math rather than for speed.
func openGroup(n int, o backend.OpenOptions) ([]backend.Backend, backend.Communicator, error) {
	threads := o.Threads
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	ranks := make([]backend.Backend, n)
	for r := range ranks {
		ranks[r] = New(max(1, threads/n))
	}
	return ranks, backend.NewHostCommunicator(ranks), nil
}
