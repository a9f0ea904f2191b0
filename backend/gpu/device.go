package gpu

import (
	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/gpu/cuda"
)

// init registers the "cuda" device: an NVIDIA GPU through this backend.
// Its settings come from the environment the program's edge hands over
// (backend.OpenOptions.Env, backend.ConfigureDevices), parsed by
// ParseOptions.
func init() {
	backend.RegisterDevice(backend.Device{
		Name:        "cuda",
		Accelerator: true,
		Available:   cuda.Available,
		Configure: func(env func(string) (string, bool)) error {
			o, err := ParseOptions(orNone(env))
			if err != nil {
				return err
			}
			return cuda.Configure(*o.CUDA)
		},
		Open: func(o backend.OpenOptions) (backend.Backend, error) {
			opts, err := ParseOptions(orNone(o.Env))
			if err != nil {
				return nil, err
			}
			opts.BatchInvariant = opts.BatchInvariant || o.BatchInvariant
			b, err := Open(o.Ordinal, opts)
			if err != nil {
				return nil, err // a nil Backend, not a nil *Backend inside one
			}
			return b, nil
		},
		OpenGroup: func(n int, o backend.OpenOptions) ([]backend.Backend, backend.Communicator, error) {
			opts, err := ParseOptions(orNone(o.Env))
			if err != nil {
				return nil, nil, err
			}
			opts.BatchInvariant = opts.BatchInvariant || o.BatchInvariant
			ranks, comm, err := OpenGroup(n, opts)
			if err != nil {
				return nil, nil, err
			}
			out := make([]backend.Backend, len(ranks))
			for i, b := range ranks {
				out[i] = b
			}
			return out, comm, nil
		},
	})
}

// orNone returns env, or a lookup that finds nothing for nil.
func orNone(env func(string) (string, bool)) func(string) (string, bool) {
	if env == nil {
		return func(string) (string, bool) { return "", false }
	}
	return env
}

// Inspect describes GPU ordinal for 'bitdecode inspect gpu': device,
// driver, NVRTC and cuBLASLt versions, the kernel cache and, with probe, a
// read-bandwidth probe (it streams 1 GiB).
func Inspect(ordinal int, probe bool) (cuda.Info, error) { return cuda.Inspect(ordinal, probe) }
