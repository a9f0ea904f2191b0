package gpu

import (
	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/gpu/cuda"
)

// init registers the "cuda" device: an NVIDIA GPU through this backend.
func init() {
	backend.RegisterDevice(backend.Device{
		Name:        "cuda",
		Accelerator: true,
		Available:   cuda.Available,
		Open: func(o backend.OpenOptions) (backend.Backend, error) {
			return New(o.Ordinal)
		},
	})
}

// Inspect describes GPU ordinal for 'bitdecode inspect gpu': device,
// driver, NVRTC and cuBLASLt versions, the kernel cache and, with probe, a
// read-bandwidth probe (it streams 1 GiB).
func Inspect(ordinal int, probe bool) (cuda.Info, error) { return cuda.Inspect(ordinal, probe) }
