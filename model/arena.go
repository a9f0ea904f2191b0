package model

import "github.com/bitdecode/bitdecode/backend"

// arena allocates the tensors of one forward pass and frees them together.
type arena struct {
	be      backend.Backend
	tensors []backend.Tensor
	err     error
}

// alloc returns a new tensor; after a failure it returns nil and a.err is set.
func (a *arena) alloc(dt backend.DType, shape ...int) backend.Tensor {
	if a.err != nil {
		return nil
	}
	t, err := a.be.Alloc(dt, shape...)
	if err != nil {
		a.err = err
		return nil
	}
	a.tensors = append(a.tensors, t)
	return t
}

func (a *arena) free() {
	for _, t := range a.tensors {
		a.be.Free(t)
	}
}
