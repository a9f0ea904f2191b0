package cpu

import (
	"fmt"
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

// configure reads the CPU device's settings from env: EnvInt4 ("int8dot",
// the default, or "float") and EnvHugePages ("on", the default, or "off").
// They apply to weights loaded after.
func configure(env func(string) (string, bool)) error {
	v, ok := env(EnvInt4)
	switch {
	case !ok || v == "" || v == "int8dot":
		int4IntegerOn = true
	case v == "float":
		int4IntegerOn = false
	default:
		return fmt.Errorf("%s=%q: want int8dot or float", EnvInt4, v)
	}
	on, err := parseHugePages(env(EnvHugePages))
	if err != nil {
		return err
	}
	hugePagesOn = on
	return nil
}
