package cpu

import "github.com/bitdecode/bitdecode/backend"

func init() {
	backend.RegisterDevice(backend.Device{
		Name:      "cpu",
		Available: func() error { return nil },
		Configure: configure,
		Open: func(o backend.OpenOptions) (backend.Backend, error) {
			return New(o.Threads), nil
		},
	})
}
