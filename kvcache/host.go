package kvcache

import (
	"fmt"

	"github.com/bitdecode/bitdecode/attn"
	"github.com/bitdecode/bitdecode/backend"
)

// hostBuffers are the host copies of one layer's q, k, v and attention
// output that the CPU caches compute on: Attend downloads the backend's
// tensors into them (a copy on the CPU backend, a transfer on a device) and
// uploads the output back. They grow to the largest batch seen.
type hostBuffers struct {
	be           backend.Backend
	q, k, v, out []float32 // [T][Hq·D], [T][Hkv·D] ×2, [T][Hq·D]
}

// download copies q, k and v of a batch of T tokens of shape sh.
func (h *hostBuffers) download(layer, T int, sh attn.Shape, q, k, v backend.Tensor) error {
	qw, kvw := sh.Hq*sh.D, sh.Hkv*sh.D
	h.q, h.k, h.v, h.out = grow(h.q, T*qw), grow(h.k, T*kvw), grow(h.v, T*kvw), grow(h.out, T*qw)
	for _, t := range []struct {
		dst []float32
		src backend.Tensor
	}{{h.q, q}, {h.k, k}, {h.v, v}} {
		if err := h.be.Download(t.dst, t.src); err != nil {
			return fmt.Errorf("kvcache: layer %d: %w", layer, err)
		}
	}
	return nil
}

// upload copies the attention output into out.
func (h *hostBuffers) upload(layer int, out backend.Tensor) error {
	if err := h.be.Upload(out, h.out); err != nil {
		return fmt.Errorf("kvcache: layer %d: %w", layer, err)
	}
	return nil
}

func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}
