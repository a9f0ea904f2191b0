package cuda

import (
	"fmt"

	"github.com/bitdecode/bitdecode/backend"
	gcuda "github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/internal/half"
	"github.com/bitdecode/bitdecode/wq"
)

var _ backend.QuantWeightLoader = (*Backend)(nil)

// LoadQuantWeight implements backend.QuantWeightLoader. int3, int4 and int8
// matrices stay packed on the device (wq's layout): decode-sized batches
// (T <= kernels.GEMVQMaxRows) read them with gemvq.cu's tensor-core GEMV,
// prefill dequantizes them to fp16 and multiplies with cuBLASLt. fp16
// matrices are stored like any weight.
// DEC is not built on the GPU yet: a dec is an error that says so.
func (b *Backend) LoadQuantWeight(name string, m *wq.Matrix, dec *wq.DEC) (backend.Weight, error) {
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("backend/cuda: weight %s: %w", name, err)
	}
	if dec != nil {
		return nil, fmt.Errorf("backend/cuda: weight %s: DEC (error compensation from host memory) has no CUDA kernel yet; drop --dec-k or use --device cpu", name)
	}
	bits := m.Elem.Bits()
	if !m.Elem.IsInt() || !(bits == 3 || bits == 4 || bits == 8) || m.Group%32 != 0 {
		// Dequantize here: exactly wq's values, stored as fp16 like any matrix.
		data := make([]float32, m.N*m.K)
		for n := range m.N {
			m.DequantRow(data[n*m.K:(n+1)*m.K], n)
		}
		return b.LoadWeight(name, backend.F32, []int{m.N, m.K}, gcuda.Bytes(data))
	}
	g, err := b.quantKernels()
	if err != nil {
		return nil, fmt.Errorf("backend/cuda: weight %s: %w", name, err)
	}
	if !g.Reads(bits, m.Group, m.K) {
		return nil, fmt.Errorf("backend/cuda: weight %s: int%d groups of %d over %d channels have no kernel", name, bits, m.Group, m.K)
	}
	w := &weight{owner: b, name: name, shape: []int{m.N, m.K}, qbits: bits, qgroup: m.Group}
	err = b.Do(func(c *gcuda.Ctx) error {
		var err error
		if w.q, err = c.Alloc(4 * len(m.Words)); err != nil {
			return err
		}
		if w.qp, err = c.Alloc(2 * len(m.Params)); err != nil {
			return err
		}
		if err := c.HtoD(w.q, gcuda.Bytes(m.Words)); err != nil {
			return err
		}
		return c.HtoD(w.qp, gcuda.Bytes(m.Params))
	})
	if err != nil {
		b.freeWeightMem(w)
		return nil, fmt.Errorf("backend/cuda: weight %s: %w", name, err)
	}
	return b.register(w)
}

var _ backend.RandomQuantLoader = (*Backend)(nil)

// LoadRandomQuant implements backend.RandomQuantLoader: codes filled on the
// device with the bits of random fp16 normals, every (scale, zero) pair
// 2·std/L and −std (ŵ spans ±std like N(0, std²) weights' central mass).
func (b *Backend) LoadRandomQuant(name string, shape []int, e wq.Elem, G int, seed uint64) (backend.Weight, error) {
	if len(shape) != 2 || shape[0] <= 0 || shape[1] <= 0 {
		return nil, fmt.Errorf("backend/cuda: random weight %s: shape %v is not a matrix", name, shape)
	}
	N, K := shape[0], shape[1]
	bits := e.Bits()
	if !e.IsInt() || G <= 0 || G%32 != 0 || K%G != 0 {
		return nil, fmt.Errorf("backend/cuda: random weight %s: %v with groups of %d over %d channels has no kernel", name, e, G, K)
	}
	g, err := b.quantKernels()
	if err != nil {
		return nil, fmt.Errorf("backend/cuda: weight %s: %w", name, err)
	}
	if !g.Reads(bits, G, K) {
		return nil, fmt.Errorf("backend/cuda: weight %s: int%d groups of %d over %d channels have no kernel", name, bits, G, K)
	}
	const std = 0.02
	scale := half.FromFloat32(2 * std / float32(e.Levels()))
	zero := half.FromFloat32(-std)
	words := N * K / 32 * bits // 32 channels in `bits` words, every format
	w := &weight{owner: b, name: name, shape: []int{N, K}, qbits: bits, qgroup: G}
	err = b.dev.Do(func(c *gcuda.Ctx) error {
		var err error
		if w.q, err = c.Alloc(4 * words); err != nil {
			return err
		}
		if w.qp, err = c.Alloc(4 * N * (K / G)); err != nil {
			return err
		}
		if err := b.ops.FillNormalF16(c, b.stream, w.q, 2*words, uint32(seed^seed>>32), 1); err != nil {
			return err
		}
		return c.Memset32Async(w.qp, uint32(zero)<<16|uint32(scale), N*(K/G), b.stream)
	})
	if err != nil {
		b.freeWeightMem(w)
		return nil, fmt.Errorf("backend/cuda: random weight %s %v: %w", name, shape, err)
	}
	return b.register(w)
}

// quantKernels compiles gemvq.cu on first use.
func (b *Backend) quantKernels() (*kernels.GEMVQ, error) {
	b.gemvqOnce.Do(func() { b.gemvq, b.gemvqErr = kernels.LoadGEMVQ(b.dev) })
	return b.gemvq, b.gemvqErr
}

// linearQuant is Linear over a packed weight: gemvq.cu for decode-sized
// batches, fp16 dequantization into scratch plus cuBLASLt otherwise.
func (b *Backend) linearQuant(d, xt *tensor, wt, bt *weight, T, N, K int) {
	var bp gcuda.DevicePtr
	if bt != nil {
		bp = bt.f32
	}
	if T <= kernels.GEMVQMaxRows {
		b.launch("Linear", func(c *gcuda.Ctx) error {
			if err := b.gemvq.Launch(c, b.stream, d.ptr, xt.ptr, wt.q, wt.qp, bp, T, N, K, wt.qbits, wt.qgroup); err != nil {
				return fmt.Errorf("weight %s: %w", wt.name, err)
			}
			return nil
		}, u64(d.ptr), u64(xt.ptr), u64(wt.q), u64(wt.qp), u64(bp), u64(T), u64(N), u64(K), u64(wt.qbits), u64(wt.qgroup))
		return
	}
	b.launch("Linear", func(c *gcuda.Ctx) error {
		// One scratch holds x in fp16, then the dequantized weight.
		xBytes := (2*T*K + 255) / 256 * 256
		buf, err := b.scratch(c, xBytes+2*N*K)
		if err != nil {
			return err
		}
		xh, wh := buf, buf+gcuda.DevicePtr(xBytes)
		err = b.gemvq.Dequant(c, b.stream, wh, wt.q, wt.qp, N, K, wt.qbits, wt.qgroup)
		if err == nil {
			err = b.gemmF16(c, d, xt, xh, wh, bt, T, N, K)
		}
		if err != nil {
			return fmt.Errorf("weight %s: %w", wt.name, err)
		}
		return nil
	})
}

// isQuant reports whether w is a packed low-bit weight.
func (w *weight) isQuant() bool { return w.q != 0 }
