package gpu

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/internal/half"
	"github.com/bitdecode/bitdecode/wq"
)

var _ backend.QuantWeightLoader = (*Backend)(nil)

// n_tb for a DEC weight that names none (wq.DEC.Blocks 0), residual in
// device memory: one DEC CTA per decTermsPerBlock (selected row, output)
// terms of a token, within [decDefaultBlocksMin, decDefaultBlocksMax] and
// what the shape allows (docs/perf/dec.md, v4: more, narrower slices
// shorten the DEC CTAs' chain of loads; the best n_tb measured on the H100
// grew with k_chunk on the Llama-3.1-8B shapes, but 4096x14336 at small
// k_chunk, where 8 is best: 'bitdecode tune dec' picks per shape). A
// residual in host memory gets decDefaultBlocksMin: more CTAs reading over
// PCIe only cost there (bench/results/2026-11-25-h100-dec-2: k_chunk 64 on
// every layer 26.3 ms a step at this rule's n_tb).
const (
	decTermsPerBlock    = 8192
	decDefaultBlocksMin = 8
	decDefaultBlocksMax = 64
)

// decPrefillScratch bounds the selection scratch of one prefill DEC launch;
// longer batches are compensated in groups of tokens.
const decPrefillScratch = 64 << 20

// decWeight is a weight's DEC state on the GPU: the residual in mapped host
// memory and the device scratch its decode steps select into.
type decWeight struct {
	host   *cuda.HostBuffer // Rᵀ's words, then its params (256-byte aligned); mapped (nil on the device)
	res    kernels.DECResidual
	kChunk int
	blocks int            // n_tb
	S      int            // channels one token selects
	sel    cuda.DevicePtr // [GEMVMaxRows][S] int32, decode batches' selection; then the residual when on the device (one allocation)
	mode   kernels.DECMode
	part   cuda.DevicePtr // [GEMVMaxRows][N] float32, the compensation (concurrent and fused modes; fused: DECPartEmpty between launches)
	flags  cuda.DevicePtr // [DECFlagWords(N)] uint32, zeroed, the tile flags (fused mode)
	// q6 marks a weight in the tiled layout with its int4 residual in
	// device memory (q6DEC, or a joined group's weight: joinTiled): one
	// row of x runs a selection launch, then gemv_q6_dec where v6.1 reads
	// the weight (linearQuantQ6); other batches the tiled base, then the
	// serial compensation. No part or flags.
	q6 bool
}

// q6DEC reports whether a packed int-bits [N, K] weight in groups of G
// with DEC dec is stored in the tiled layout and runs gemvq6dec.cu's
// gemv_q6_dec at one row of x (session 19, docs/perf/dec.md): an int4
// residual in device memory, fused mode (the default for int4), not
// Options.DECQ3, and v6.1 (not v6: GEMVQ.V51) reading the weight at one
// row (tiledLayout as for a weight without DEC).
func q6DEC(o *Options, g *kernels.GEMVQ, bits, N, K, G int, dec *wq.DEC) bool {
	return dec != nil && dec.KChunk > 0 && dec.R.Elem == wq.Int4 && o.DECResidualOnDevice && !o.DECQ3 &&
		o.decMode(wq.Int4) == kernels.DECFused && !(g.V51 && bits == 4) &&
		kernels.GEMVQ6DECReads(bits, G, N, K) == nil && tiledLayout(o, g, bits, N, K, G, true)
}

// LoadQuantWeight implements backend.QuantWeightLoader. int3, int4 and int8
// matrices stay packed on the device (wq's layout, or for int4 weights of
// 2048+ rows without DEC the tiled layout only: tiledLayout): decode-sized
// batches (T <= kernels.GEMVQMaxRows) read them with gemvq4.cu's and
// gemvq3.cu's one-row GEMVs (no DEC) or gemvq.cu's tensor-core one,
// prefill dequantizes them to fp16 and multiplies with cuBLASLt. fp16
// matrices are stored like any weight.
// A DEC residual (int4, int8 or fp16; N a multiple of 128, or of 32 for
// fp16) is copied into pinned host memory mapped into the device, which
// dec.cu reads over PCIe after each base product (doc.go).
func (b *Backend) LoadQuantWeight(name string, m *wq.Matrix, dec *wq.DEC) (backend.Weight, error) {
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("backend/gpu: weight %s: %w", name, err)
	}
	if dec != nil {
		if err := b.checkDEC(m, dec); err != nil {
			return nil, fmt.Errorf("backend/gpu: weight %s: %w", name, err)
		}
	}
	w, err := b.loadQuantBase(name, m, dec)
	if err != nil || dec == nil || dec.KChunk == 0 {
		return w, err
	}
	cw := w.(*weight)
	if err := b.attachDEC(cw, dec); err != nil {
		b.FreeWeight(cw)
		return nil, fmt.Errorf("backend/gpu: weight %s: DEC: %w", name, err)
	}
	return cw, nil
}

// checkDEC validates a DEC residual for weight m before anything is
// allocated.
func (b *Backend) checkDEC(m *wq.Matrix, dec *wq.DEC) error {
	if err := dec.R.Validate(); err != nil {
		return fmt.Errorf("DEC residual: %w", err)
	}
	if dec.R.N != m.K || dec.R.K != m.N {
		return fmt.Errorf("[%d, %d]: DEC residual is [%d, %d], want [%d, %d]", m.N, m.K, dec.R.N, dec.R.K, m.K, m.N)
	}
	if dec.KChunk < 0 || dec.Blocks < 0 {
		return fmt.Errorf("DEC k_chunk %d, n_tb %d: want non-negative values", dec.KChunk, dec.Blocks)
	}
	if err := kernels.DECReads(dec.R.Elem, m.N); err != nil {
		return fmt.Errorf("DEC residual for [%d, %d]: %w", m.N, m.K, err)
	}
	if b.opts.DECMode == kernels.DECFused && dec.R.Elem != wq.Int4 {
		return fmt.Errorf("DEC mode fused (%s): %v residuals run serial or concurrent (fused reads int4)", EnvDECMode, dec.R.Elem)
	}
	return nil
}

// decBlocks returns n_tb for a residual of N outputs whose tokens select S
// channels, in device memory or not: all (Options.DECBlocks) when
// positive, else the weight's own (tuned) value, else the default
// (decTermsPerBlock) clamped to the shape's range. An explicit value out of
// range is an error.
func decBlocks(e wq.Elem, N, S int, onDevice bool, own, all int) (int, error) {
	lo, hi := max(kernels.DECMinBlocks(e, N), kernels.DECFusedMinBlocks(N)), kernels.DECMaxBlocks(N)
	if all > 0 {
		own = all
	}
	if own == 0 {
		def := decDefaultBlocksMin
		if onDevice {
			def = min(max((S*N+decTermsPerBlock-1)/decTermsPerBlock, decDefaultBlocksMin), decDefaultBlocksMax)
		}
		return min(max(def, lo), hi), nil
	}
	if own < lo || own > hi {
		return 0, fmt.Errorf("n_tb %d out of range [%d, %d] for %d %v outputs", own, lo, hi, N, e)
	}
	return own, nil
}

// attachDEC copies dec's residual into mapped host memory (or device memory
// with Options.DECResidualOnDevice) and allocates the selection scratch of
// decode batches.
func (b *Backend) attachDEC(w *weight, dec *wq.DEC) error {
	r := dec.R
	N, K := r.K, r.N
	blocks, err := decBlocks(r.Elem, N, kernels.DECSelected(K, dec.KChunk), b.opts.DECResidualOnDevice, dec.Blocks, b.opts.DECBlocks)
	if err != nil {
		return err
	}
	if _, err := b.decKernels(); err != nil {
		return err
	}
	words, params := cuda.Bytes(r.Words), cuda.Bytes(r.Params)
	off := (len(words) + 255) / 256 * 256
	mode := b.opts.decMode(r.Elem)
	q6 := w.qt != 0 // tiled with DEC: q6DEC held at load
	if q6 {
		if _, err := b.q6Kernels(); err != nil {
			return err
		}
		mode = kernels.DECSerial // no part, no flags: linearQuantQ6, or the tiled base and Compensate
		b.q6Loaded.Store(true)
	}
	dw := &decWeight{kChunk: dec.KChunk, blocks: blocks, S: kernels.DECSelected(K, dec.KChunk), mode: mode, q6: q6}
	w.dec = dw // freed with the weight from here on
	onDevice := b.opts.DECResidualOnDevice
	selBytes := (4*kernels.GEMVMaxRows*dw.S + 255) / 256 * 256
	var resDev cuda.DevicePtr
	err = b.Do(func(c *cuda.Ctx) error {
		var err error
		if onDevice {
			// The selection scratch and the residual share one allocation,
			// freed with the scratch.
			if dw.sel, err = c.Alloc(selBytes + off + max(len(params), 16)); err != nil {
				return err
			}
			resDev = dw.sel + cuda.DevicePtr(selBytes)
			if err := c.HtoD(resDev, words); err != nil {
				return err
			}
			if len(params) > 0 {
				if err := c.HtoD(resDev+cuda.DevicePtr(off), params); err != nil {
					return err
				}
			}
		} else if dw.host, err = c.AllocHost(off+max(len(params), 16), true); err != nil {
			return err
		}
		if (mode == kernels.DECConcurrent || mode == kernels.DECFused) && w.isQuant() {
			if dw.part, err = c.Alloc(4 * kernels.GEMVMaxRows * N); err != nil {
				return err
			}
		}
		if mode == kernels.DECFused && w.isQuant() {
			// Fused launches find part empty and leave it so (dec.cu's protocol).
			if err := c.Memset32Async(dw.part, kernels.DECPartEmpty, kernels.GEMVMaxRows*N, b.stream); err != nil {
				return err
			}
		}
		if mode == kernels.DECFused && w.isQuant() {
			if dw.flags, err = c.Alloc(4 * kernels.DECFlagWords(N)); err != nil {
				return err
			}
			if err := c.Memset32Async(dw.flags, 0, kernels.DECFlagWords(N), b.stream); err != nil {
				return err
			}
		}
		if !onDevice {
			dw.sel, err = c.Alloc(4 * kernels.GEMVMaxRows * dw.S)
		}
		return err
	})
	if err != nil {
		return err
	}
	if !onDevice {
		copy(dw.host.Bytes(), words)
		copy(dw.host.Bytes()[off:], params)
		resDev = dw.host.DevicePtr()
	}
	dw.res = kernels.DECResidual{Elem: r.Elem, Words: resDev, N: N, K: K}
	if r.Elem.IsInt() {
		dw.res.Params = resDev + cuda.DevicePtr(off)
	}
	return nil
}

// loadQuantBase loads the base matrix: packed for gemvq.cu, or dequantized
// to fp16; one without DEC (dec nil or k_chunk 0), or whose DEC runs
// inside v6.1 (q6DEC), may be stored in the tiled layout only (tiledLayout,
// tileQuant).
func (b *Backend) loadQuantBase(name string, m *wq.Matrix, dec *wq.DEC) (backend.Weight, error) {
	bits := m.Elem.Bits()
	if !m.Elem.IsInt() || !(bits == 3 || bits == 4 || bits == 8) || m.Group%32 != 0 {
		// Dequantize here: exactly wq's values, stored as fp16 like any matrix.
		data := make([]float32, m.N*m.K)
		for n := range m.N {
			m.DequantRow(data[n*m.K:(n+1)*m.K], n)
		}
		return b.LoadWeight(name, backend.F32, []int{m.N, m.K}, cuda.Bytes(data))
	}
	g, err := b.quantKernels()
	if err != nil {
		return nil, fmt.Errorf("backend/gpu: weight %s: %w", name, err)
	}
	if !g.Reads(bits, m.Group, m.K) {
		return nil, fmt.Errorf("backend/gpu: weight %s: int%d groups of %d over %d channels have no kernel", name, bits, m.Group, m.K)
	}
	w := &weight{owner: b, name: name, shape: []int{m.N, m.K}, qbits: bits, qgroup: m.Group}
	err = b.Do(func(c *cuda.Ctx) error {
		var err error
		if w.q, err = c.Alloc(4 * len(m.Words)); err != nil {
			return err
		}
		if w.qp, err = c.Alloc(2 * len(m.Params)); err != nil {
			return err
		}
		if err := c.HtoD(w.q, cuda.Bytes(m.Words)); err != nil {
			return err
		}
		if err := c.HtoD(w.qp, cuda.Bytes(m.Params)); err != nil {
			return err
		}
		plain := dec == nil || dec.KChunk == 0 || q6DEC(&b.opts, g, bits, m.N, m.K, m.Group, dec)
		if tiledLayout(&b.opts, g, bits, m.N, m.K, m.Group, plain) {
			return b.tileQuant(c, g, w)
		}
		return nil
	})
	if err != nil {
		b.freeWeightMem(w)
		return nil, fmt.Errorf("backend/gpu: weight %s: %w", name, err)
	}
	return b.register(w)
}

// tiledLayout reports whether a packed int-bits [N, K] weight with groups
// of G is stored on the device in the tiled layout only
// (kernels.PackTiles): without DEC (plain), unless Options.GEMVQWQ, where
// LaunchTiled would run v6.1 at one row of x (g.UsesV6: int4 where Launch
// runs v5, int3 (session 15d, not under Options.GEMVQInt3V32) and int8
// where Launch runs v4.1 (session 16, not under Options.GEMVQInt8V4), of
// 2048 rows or more, groups of 128·2^k; not under Options.GEMVQV2 or GEMVQV3,
// whose v2 and v3 routes Launch keeps over wq's layout). Every
// kernel such a weight meets then has a tiled form (kernels.GEMVQ's
// LaunchTiled, DequantTiled); DEC's kernels read wq's layout only.
func tiledLayout(o *Options, g *kernels.GEMVQ, bits, N, K, G int, plain bool) bool {
	return plain && !o.GEMVQWQ && g.UsesV6(1, N, K, bits, G)
}

// tileQuant moves w (packed, no DEC, its words and params in wq's layout
// written) into the tiled layout: tile_pack on the device into new
// memory, then wq's copy freed, so the weight's only device copy is the
// tiled one (q and qp 0). Packing on the device beats PackTiles on the
// host: the same bytes cross PCIe either way, and tile_pack moves them at
// device bandwidth where the host loop reorders ~1 G words one core at a
// time (docs/perf/gemvq.md, session 15c). The peak is one weight's two
// copies, for the time of one pack.
func (b *Backend) tileQuant(c *cuda.Ctx, g *kernels.GEMVQ, w *weight) error {
	N, K := w.shape[0], w.shape[1]
	words, params := kernels.TiledBytes(w.qbits, N, K, w.qgroup)
	var err error
	if w.qt, err = c.Alloc(words); err != nil {
		return err
	}
	if w.qtp, err = c.Alloc(params); err != nil {
		return err
	}
	if err := g.PackTiles(c, b.stream, w.qt, w.qtp, w.q, w.qp, N, K, w.qbits, w.qgroup); err != nil {
		return err
	}
	// wq's copy goes once tile_pack has read it.
	if err := c.SyncStream(b.stream); err != nil {
		return err
	}
	q, qp := w.q, w.qp
	w.q, w.qp = 0, 0
	return errors.Join(c.Free(q), c.Free(qp))
}

var _ backend.RandomQuantLoader = (*Backend)(nil)

// LoadRandomQuant implements backend.RandomQuantLoader: codes filled on the
// device with the bits of random fp16 normals, every (scale, zero) pair
// 2·std/L and −std (ŵ spans ±std like N(0, std²) weights' central mass).
// A DEC residual gets random int4 codes on the host with (scale, zero) of
// an RTN residual's size, then goes to mapped host memory as a real one.
func (b *Backend) LoadRandomQuant(name string, shape []int, e wq.Elem, G int, seed uint64, dec wq.DEC) (backend.Weight, error) {
	if len(shape) != 2 || shape[0] <= 0 || shape[1] <= 0 {
		return nil, fmt.Errorf("backend/gpu: random weight %s: shape %v is not a matrix", name, shape)
	}
	N, K := shape[0], shape[1]
	bits := e.Bits()
	if !e.IsInt() || G <= 0 || G%32 != 0 || K%G != 0 {
		return nil, fmt.Errorf("backend/gpu: random weight %s: %v with groups of %d over %d channels has no kernel", name, e, G, K)
	}
	g, err := b.quantKernels()
	if err != nil {
		return nil, fmt.Errorf("backend/gpu: weight %s: %w", name, err)
	}
	if !g.Reads(bits, G, K) {
		return nil, fmt.Errorf("backend/gpu: weight %s: int%d groups of %d over %d channels have no kernel", name, bits, G, K)
	}
	const std = 0.02
	scale := half.FromFloat32(2 * std / float32(e.Levels()))
	zero := half.FromFloat32(-std)
	words := N * K / 32 * bits // 32 channels in `bits` words, every format
	w := &weight{owner: b, name: name, shape: []int{N, K}, qbits: bits, qgroup: G}
	err = b.dev.Do(func(c *cuda.Ctx) error {
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
		if err := c.Memset32Async(w.qp, uint32(zero)<<16|uint32(scale), N*(K/G), b.stream); err != nil {
			return err
		}
		// LoadRandomQuant's residual is int4 (below).
		res := dec
		res.R = &wq.Matrix{Elem: wq.Int4}
		if tiledLayout(&b.opts, g, bits, N, K, G, dec.KChunk == 0 || q6DEC(&b.opts, g, bits, N, K, G, &res)) {
			return b.tileQuant(c, g, w)
		}
		return nil
	})
	if err != nil {
		b.freeWeightMem(w)
		return nil, fmt.Errorf("backend/gpu: random weight %s %v: %w", name, shape, err)
	}
	if dec.KChunk > 0 {
		res, err := wq.NewMatrix(wq.Int4, wq.ResidualGroup, K, N)
		if err == nil {
			rng := rand.New(rand.NewPCG(seed, 0xdec))
			for i := range res.Words {
				res.Words[i] = rng.Uint32()
			}
			// An RTN residual of int4 weights spans about one weight step.
			rs, rz := half.FromFloat32(2*std/float32(e.Levels())/15), half.FromFloat32(-std/float32(e.Levels()))
			for i := 0; i < len(res.Params); i += 2 {
				res.Params[i], res.Params[i+1] = rs, rz
			}
			dec.R = res
			if err = b.checkDEC(&wq.Matrix{Elem: e, Group: G, N: N, K: K}, &dec); err == nil {
				err = b.attachDEC(w, &dec)
			}
		}
		if err != nil {
			b.freeWeightMem(w)
			return nil, fmt.Errorf("backend/gpu: random weight %s %v: DEC: %w", name, shape, err)
		}
	}
	return b.register(w)
}

// beside reports whether Linear over w runs its DEC beside the base GEMV
// (concurrent or fused mode: a packed weight, a decode batch; or inside
// it: a q6 weight at one row) rather than after it.
func (dw *decWeight) beside(T int) bool {
	return dw != nil && ((dw.part != 0 || dw.flags != 0) && T <= kernels.GEMVMaxRows || dw.q6 && T == 1)
}

// q6Kernels compiles gemvq6dec.cu on first use.
func (b *Backend) q6Kernels() (*kernels.GEMVQ6DEC, error) {
	b.q6Once.Do(func() {
		if b.q6K, b.q6Err = kernels.LoadGEMVQ6DEC(b.dev); b.q6Err == nil {
			b.q6K.Tail = b.opts.DECTail
		}
	})
	return b.q6K, b.q6Err
}

// linearQuantQ6 is Linear over a q6 weight at one row of x: select_q6
// (dec.cu's select_topk as a programmatic dependent) writes x's list
// (wq.SelectApprox) to the weight's scratch,
// then one gemv_q6_dec launch computes v6.1's sums at LaunchTiled's split
// and adds wq.Compensate's compensation for the list (the bits of the
// tiled base then Compensate); where v6.1 would not read the weight alone
// (a view of a joined group run apart: k, v), the tiled base, then
// Compensate.
//
// Where the AddRMSNorm queued right before writes x, it may write the
// list instead (unless Options.NoDECNormSelect, normsel.go): no selection launch.
func (b *Backend) linearQuantQ6(d, xt *tensor, wt *weight, bp cuda.DevicePtr, N, K int) {
	dw := wt.dec
	b.queueAfterSel(xt.ptr, K, dw.sel, dw.kChunk, func(given bool) queuedOp {
		return b.linearQuantQ6Op(d, xt, wt, bp, N, K, given)
	})
}

// linearQuantQ6Op is linearQuantQ6's op; with given its list is written
// by the op before it (no select_q6).
func (b *Backend) linearQuantQ6Op(d, xt *tensor, wt *weight, bp cuda.DevicePtr, N, K int, given bool) queuedOp {
	dw := wt.dec
	f := func(c *cuda.Ctx) error {
		l := kernels.DECLaunch{X: xt.ptr, Y: d.ptr, Sel: dw.sel, R: &dw.res, T: 1, KChunk: dw.kChunk, Blocks: dw.blocks}
		var err error
		if !given {
			err = b.q6K.Select(c, b.stream, &l)
		}
		switch {
		case err != nil:
		case b.gemvq.UsesV6(1, N, K, wt.qbits, wt.qgroup):
			err = b.q6K.Launch(c, b.stream, d.ptr, xt.ptr, wt.qt, wt.qtp, bp, dw.sel, b.decRows(dw.S), &dw.res, N, K, wt.qbits, wt.qgroup,
				b.gemvq.SplitV5For(N, K, wt.qbits), b.gemvq.EarlyWeights)
		default:
			err = b.gemvq.LaunchTiled(c, b.stream, d.ptr, xt.ptr, wt.qt, wt.qtp, bp, 1, N, K, wt.qbits, wt.qgroup)
			if err == nil {
				err = b.decK.Compensate(c, b.stream, &l)
			}
		}
		if err != nil {
			return fmt.Errorf("weight %s: %w", wt.name, err)
		}
		return nil
	}
	return queuedOp{op: "Linear DEC", f: f, key: []uint64{u64(d.ptr), u64(xt.ptr), u64(wt.qt), u64(wt.qtp), u64(bp), u64(N), u64(K),
		u64(wt.qbits), u64(wt.qgroup), u64(dw.res.Words), u64(dw.res.Params), u64(dw.sel), u64(dw.kChunk), u64(dw.blocks), b2u(given)}}
}

// linearQuantDEC is Linear over a packed weight with DEC in concurrent
// mode, as one op: fork the second stream after x is ready; there zero the
// weight's part buffer, select and compensate into it; meanwhile the base
// GEMV on the main stream; join; y += part (the same float32 add as
// serial mode: the same bits).
func (b *Backend) linearQuantDEC(d, xt *tensor, wt *weight, bp cuda.DevicePtr, T, N, K int) {
	dw := wt.dec
	b.launch("Linear DEC", func(c *cuda.Ctx) error {
		if err := b.decStreams(c); err != nil {
			return err
		}
		l := kernels.DECLaunch{X: xt.ptr, Y: dw.part, Sel: dw.sel, R: &dw.res, T: T, KChunk: dw.kChunk, Blocks: dw.blocks}
		err := cmp.Or(c.Record(b.decFork, b.stream), c.WaitEvent(b.decStream, b.decFork))
		if err == nil {
			err = c.Memset32Async(dw.part, 0, T*N, b.decStream)
		}
		if err == nil {
			err = b.decK.Select(c, b.decStream, &l)
		}
		if err == nil {
			err = b.decK.Compensate(c, b.decStream, &l)
		}
		if err == nil {
			err = c.Record(b.decJoin, b.decStream)
		}
		if err == nil {
			err = b.gemvqLaunch(c, d, xt, wt, bp, T, N, K)
		}
		if err == nil {
			err = c.WaitEvent(b.stream, b.decJoin)
		}
		if err == nil {
			err = b.ops.Add(c, b.stream, d.ptr, d.ptr, dw.part, T*N)
		}
		if err != nil {
			return fmt.Errorf("weight %s: %w", wt.name, err)
		}
		return nil
	}, u64(d.ptr), u64(xt.ptr), u64(wt.q), u64(wt.qp), u64(bp), u64(T), u64(N), u64(K), u64(wt.qbits), u64(wt.qgroup),
		u64(dw.res.Words), u64(dw.res.Params), u64(dw.sel), u64(dw.part), u64(dw.kChunk), u64(dw.blocks), uint64(dw.res.Elem))
}

// linearQuantFused is Linear over a packed weight with DEC in fused mode:
// one launch of gemvq.cu's gemv_q_dec whose first n_tb CTAs select and
// compensate from host memory while the others compute the base GEMV (the
// same bits as serial mode; a selection launch first only when a token
// selects more than kernels.DECFusedSelectMax channels). In a LinearGroup
// the DEC CTAs read the lists an earlier weight of the group kept for the
// same x and k_chunk instead of selecting (decListFor).
func (b *Backend) linearQuantFused(d, xt *tensor, wt *weight, bp cuda.DevicePtr, T, N, K int) {
	dw := wt.dec
	sel, listed, keep := b.decListFor(xt.ptr, dw, K, T)
	b.launch("Linear DEC", func(c *cuda.Ctx) error {
		g, err := b.fusedKernels()
		if err != nil {
			return err
		}
		l := kernels.DECLaunch{X: xt.ptr, Y: d.ptr, Sel: sel, Flags: dw.flags, Part: dw.part, R: &dw.res, T: T, KChunk: dw.kChunk, Blocks: dw.blocks,
			Listed: listed, Keep: keep}
		if err := g.Launch(c, b.stream, d.ptr, xt.ptr, wt.q, wt.qp, bp, T, N, K, wt.qbits, wt.qgroup, &l); err != nil {
			return fmt.Errorf("weight %s: %w", wt.name, err)
		}
		return nil
	}, u64(d.ptr), u64(xt.ptr), u64(wt.q), u64(wt.qp), u64(bp), u64(T), u64(N), u64(K), u64(wt.qbits), u64(wt.qgroup),
		u64(dw.res.Words), u64(dw.res.Params), u64(sel), u64(dw.flags), u64(dw.part), u64(dw.kChunk), u64(dw.blocks), uint64(dw.res.Elem),
		b2u(listed), b2u(keep))
}

// decLists is the selection lists shared by the fused DEC launches of one
// LinearGroup, which runs its weights as one Linear each over the same x
// (q/k/v, gate/up): the first weight of each (K, k_chunk, T) selects in its
// DEC CTAs and keeps the lists in its own scratch (kernels.DECLaunch.Keep);
// the later ones read them (Listed), so their DEC CTAs start with the list
// (docs/perf/dec.md, v5). Nothing else runs between a group's Linears, so
// x and the lists are unchanged until the last one.
type decLists struct {
	x     cuda.DevicePtr // the group's x; 0 outside LinearGroup
	lists []decList
}

// decList is one kept list: [T][DECSelected(K, kChunk)] int32 at sel.
type decList struct {
	K, kChunk, T int
	sel          cuda.DevicePtr
}

// decGroup starts (x non-zero) or ends (x zero) a LinearGroup's sharing of
// selection lists over x.
func (b *Backend) decGroup(x cuda.DevicePtr) {
	b.decLists.x = x
	b.decLists.lists = b.decLists.lists[:0]
}

// decListFor returns where the fused DEC launch of dw over x [T, K] finds
// its lists: sel, and listed when an earlier weight of the group kept them
// there, or keep when this launch selects and must keep them (in its own
// scratch, sel) for the weights after it. Outside a group: its own scratch,
// neither.
func (b *Backend) decListFor(x cuda.DevicePtr, dw *decWeight, K, T int) (sel cuda.DevicePtr, listed, keep bool) {
	s := &b.decLists
	if s.x == 0 || s.x != x {
		return dw.sel, false, false
	}
	for _, l := range s.lists {
		if l.K == K && l.kChunk == dw.kChunk && l.T == T {
			return l.sel, true, false
		}
	}
	s.lists = append(s.lists, decList{K: K, kChunk: dw.kChunk, T: T, sel: dw.sel})
	return dw.sel, false, true
}

// b2u is a graph key's form of a flag.
func b2u(v bool) uint64 {
	if v {
		return 1
	}
	return 0
}

// fusedKernels compiles gemvq.cu with dec.cu (fused mode) on first use.
func (b *Backend) fusedKernels() (*kernels.GEMVQDEC, error) {
	b.fusedOnce.Do(func() {
		if b.fused, b.fusedErr = kernels.LoadGEMVQDEC(b.dev); b.fusedErr == nil {
			// As quantKernels' GEMVQ: v2 with GEMVQV2 (the base the
			// other modes run, LaunchDECBase), early code loads.
			b.fused.V2, b.fused.EarlyWeights = b.opts.GEMVQV2, true
		}
	})
	return b.fused, b.fusedErr
}

// decStreams makes the DEC stream (of the highest priority, so DEC's few
// thread blocks start before the base GEMV's pending ones) and its events
// on first use.
func (b *Backend) decStreams(c *cuda.Ctx) error {
	if b.decStream != 0 {
		return nil
	}
	s, err := c.NewPriorityStream()
	if err != nil {
		return err
	}
	if b.decFork, err = c.NewEvent(); err == nil {
		b.decJoin, err = c.NewEvent()
	}
	if err != nil {
		return err
	}
	b.decStream = s
	return nil
}

// decKernels compiles dec.cu on first use.
func (b *Backend) decKernels() (*kernels.DEC, error) {
	b.decOnce.Do(func() { b.decK, b.decErr = kernels.LoadDEC(b.dev) })
	return b.decK, b.decErr
}

// compensate queues DEC for a Linear whose base output is in d: per token,
// dec.cu's selection, then the compensation from the residual in host
// memory (serial mode). Decode batches select into the weight's own
// scratch, so the op has a key and replays in a CUDA graph; prefill
// batches select into Linear's scratch, in groups of tokens.
func (b *Backend) compensate(d, xt *tensor, wt *weight, T int) {
	dw := wt.dec
	N, K := dw.res.N, dw.res.K
	if T <= kernels.GEMVMaxRows {
		b.launch("Linear DEC", func(c *cuda.Ctx) error {
			l := kernels.DECLaunch{X: xt.ptr, Y: d.ptr, Sel: dw.sel, R: &dw.res, T: T, KChunk: dw.kChunk, Blocks: dw.blocks}
			if err := b.decK.Select(c, b.stream, &l); err != nil {
				return fmt.Errorf("weight %s: %w", wt.name, err)
			}
			if err := b.decK.Compensate(c, b.stream, &l); err != nil {
				return fmt.Errorf("weight %s: %w", wt.name, err)
			}
			return nil
		}, u64(d.ptr), u64(xt.ptr), u64(dw.res.Words), u64(dw.res.Params), u64(dw.sel), u64(T), u64(N), u64(K),
			u64(dw.kChunk), u64(dw.blocks), uint64(dw.res.Elem))
		return
	}
	b.launch("Linear DEC", func(c *cuda.Ctx) error {
		group := max(1, min(T, decPrefillScratch/(4*dw.S)))
		sel, err := b.scratch(c, 4*group*dw.S)
		if err != nil {
			return err
		}
		for t0 := 0; t0 < T; t0 += group {
			n := min(group, T-t0)
			l := kernels.DECLaunch{X: xt.ptr + cuda.DevicePtr(4*t0*K), Y: d.ptr + cuda.DevicePtr(4*t0*N), Sel: sel,
				R: &dw.res, T: n, KChunk: dw.kChunk, Blocks: dw.blocks}
			if err := b.decK.Select(c, b.stream, &l); err != nil {
				return fmt.Errorf("weight %s: %w", wt.name, err)
			}
			if err := b.decK.Compensate(c, b.stream, &l); err != nil {
				return fmt.Errorf("weight %s: %w", wt.name, err)
			}
		}
		return nil
	})
}

// quantKernels compiles gemvq.cu on first use.
func (b *Backend) quantKernels() (*kernels.GEMVQ, error) {
	b.gemvqOnce.Do(func() {
		if b.gemvq, b.gemvqErr = kernels.LoadGEMVQ(b.dev); b.gemvqErr == nil {
			// v3's and v4's first codes load before their dependency
			// wait: the backend writes packed weights once, at load.
			b.gemvq.V2, b.gemvq.V3, b.gemvq.V51, b.gemvq.V61, b.gemvq.EarlyWeights = b.opts.GEMVQV2, b.opts.GEMVQV3, b.opts.GEMVQV51, b.opts.GEMVQV61, true
			b.gemvq.V32Int3, b.gemvq.V4Int8 = b.opts.GEMVQInt3V32, b.opts.GEMVQInt8V4
		}
	})
	return b.gemvq, b.gemvqErr
}

// gemvqLaunch queues the decode GEMV over a packed weight: kernels.GEMVQ's
// Launch (at T = 1 gemvq4.cu's v4 for int8 of 2048 rows or more, else
// gemvq3.cu's v3, unless Options.GEMVQV2 or GEMVQV3; v2 above), but for
// a weight with DEC in wq's layout the base its fused kernel shares
// (LaunchDECBase: v3 at one row of int4/int3, v2 else), so that its
// serial, concurrent and fused modes add the same base; a weight in the
// tiled layout (tiledLayout; with DEC a q6 weight) runs LaunchTiled: v6.1
// where Launch would run v5, v2 over the tiled layout at 2-16 rows (the
// same bits).
func (b *Backend) gemvqLaunch(c *cuda.Ctx, d, xt *tensor, wt *weight, bp cuda.DevicePtr, T, N, K int) error {
	if wt.dec != nil && wt.qt == 0 {
		return b.gemvq.LaunchDECBase(c, b.stream, d.ptr, xt.ptr, wt.q, wt.qp, bp, T, N, K, wt.qbits, wt.qgroup, wt.dec.kChunk)
	}
	if wt.qt != 0 {
		return b.gemvq.LaunchTiled(c, b.stream, d.ptr, xt.ptr, wt.qt, wt.qtp, bp, T, N, K, wt.qbits, wt.qgroup)
	}
	return b.gemvq.Launch(c, b.stream, d.ptr, xt.ptr, wt.q, wt.qp, bp, T, N, K, wt.qbits, wt.qgroup)
}

// linearQuant is Linear over a packed weight: gemvq.cu for decode-sized
// batches, gemmq.cu's fused dequant-GEMM for batches of up to gemmqMaxRows
// rows over the tiled layout (linearFused), fp16 dequantization into
// scratch plus cuBLASLt otherwise.
func (b *Backend) linearQuant(d, xt *tensor, wt, bt *weight, T, N, K int) {
	var bp cuda.DevicePtr
	if bt != nil {
		bp = bt.f32
	}
	if wt.dec.beside(T) {
		if wt.dec.q6 {
			b.linearQuantQ6(d, xt, wt, bp, N, K)
		} else if wt.dec.flags != 0 {
			b.linearQuantFused(d, xt, wt, bp, T, N, K)
		} else {
			b.linearQuantDEC(d, xt, wt, bp, T, N, K)
		}
		return
	}
	if T <= kernels.GEMVQMaxRows {
		b.launch("Linear", func(c *cuda.Ctx) error {
			if err := b.gemvqLaunch(c, d, xt, wt, bp, T, N, K); err != nil {
				return fmt.Errorf("weight %s: %w", wt.name, err)
			}
			return nil
		}, u64(d.ptr), u64(xt.ptr), u64(wt.q), u64(wt.qp), u64(wt.qt), u64(bp), u64(T), u64(N), u64(K), u64(wt.qbits), u64(wt.qgroup))
		return
	}
	if b.linearFused(d, xt, wt, bp, T, N, K) {
		return
	}
	// One scratch holds x in fp16, then the dequantized weight: up to
	// linearKeyedMaxRows rows (batched decode) the fused path's keyed
	// buffer, grown now, so that the op carries a graph key (k/v of the 8B
	// shapes keep wq's layout, and a keyless op makes its whole flush run
	// directly); above, Linear's scratch, grown when the op runs.
	xBytes := (2*T*K + 255) / 256 * 256
	var keyed cuda.DevicePtr
	var key []uint64
	if T <= linearKeyedMaxRows {
		var err error
		if keyed, err = b.growKeyed(&b.fqMu, &b.fq, &b.fqBytes, xBytes+2*N*K); err != nil {
			b.fail(fmt.Errorf("backend/gpu: Linear: weight %s: dequantization scratch: %w", wt.name, err))
			return
		}
		key = []uint64{u64(d.ptr), u64(xt.ptr), u64(wt.q), u64(wt.qp), u64(wt.qt), u64(wt.qtp), u64(bp), u64(keyed), u64(T), u64(N), u64(K),
			u64(wt.qbits), u64(wt.qgroup)}
	}
	b.launch("Linear", func(c *cuda.Ctx) error {
		buf := keyed
		if buf == 0 {
			var err error
			if buf, err = b.scratch(c, xBytes+2*N*K); err != nil {
				return err
			}
		}
		var err error
		xh, wh := buf, buf+cuda.DevicePtr(xBytes)
		if wt.qt != 0 {
			err = b.gemvq.DequantTiled(c, b.stream, wh, wt.qt, wt.qtp, N, K, wt.qbits, wt.qgroup)
		} else {
			err = b.gemvq.Dequant(c, b.stream, wh, wt.q, wt.qp, N, K, wt.qbits, wt.qgroup)
		}
		if err == nil {
			err = b.gemmF16(c, d, xt, xh, wh, bt, T, N, K, true)
		}
		if err != nil {
			return fmt.Errorf("weight %s: %w", wt.name, err)
		}
		return nil
	}, key...)
}

// isQuant reports whether w is a packed low-bit weight (in wq's layout or
// the tiled one).
func (w *weight) isQuant() bool { return w.q != 0 || w.qt != 0 }

// gemmqMaxRows is the most rows of x linearFused gives to gemmq.cu's fused
// dequant-GEMM; more dequantize to fp16 for cuBLASLt. The crossover
// measured on the H100 (docs/perf/gemvq.md, session 16, call 3), int4
// gate/up against the dequantization (~55 us) plus cuBLASLt's fp16 GEMM:
// 88 us against ~110 at 128 rows, 172 against ~118 at 256 (mma.sync
// against cuBLASLt's wgmma); down alike; q/o within 10% either way at 128.
const gemmqMaxRows = 128

// Packed weights take gemmq.cu where it beat the dequantization plus
// cuBLASLt on the H100 (docs/perf/gemvq.md, session 16, "int8 in
// gemmq.cu"; BenchmarkGEMMQ, the rule's tiling against "deq"):
//   - gemmqMinN, every width: weights of fewer output rows keep the
//     dequantization (1024x4096, the 8B's k and v: int8 14.8-18.3 us
//     against 17.7-30 at 24-128 rows; the dequantization of a few MB is
//     cheap, the fused kernel's split-K over 8 CTAs a chunk of tokens is
//     not). For int4 and int3 the step says the same: 32 sequences
//     7.73-7.79 ms against 7.91-7.93 with k and v on gemmq.cu, 64
//     sequences 10.98-11.01 against 11.24-11.25 (int4; int3 -0.1 and
//     -0.25 ms; bench/results/2026-11-26-s16-final call E). Session 17's
//     faster gemmq.cu (13.9-18.5 us at 24-64 rows against 14.4-16.4)
//     measured within 1% of it either way in the step (B = 32 -0.05 to
//     -0.1 ms, B = 64 +0.02 to +0.1; bench/results/2026-11-26-gemmqpipe-17
//     call 2): left on the dequantization;
//   - gemmqInt8SmallMaxRows: int8 weights of fewer than gemmqInt8LargeWeight
//     codes take it up to 64 rows (4096x4096: 21.9-30.2 us against
//     31.0-32.4 at 24-64 rows, 44.9 against 34.9 at 128); larger ones
//     (gate/up, down: 45-98 us against 112-125) up to gemmqMaxRows.
const (
	gemmqMinN             = 2048
	gemmqInt8SmallMaxRows = 64
	gemmqInt8LargeWeight  = 32 << 20
)

// gemmqRoutes reports whether linearFused gives T rows of x over a tiled
// int-bits [N, K] weight to gemmq.cu: kernels.GEMMQMinRows to gemmqMaxRows
// rows for weights of gemmqMinN rows or more; int8 within its limits
// above.
func gemmqRoutes(T, N, K, bits int) bool {
	if T < kernels.GEMMQMinRows || T > gemmqMaxRows {
		return false
	}
	if N < gemmqMinN {
		return false
	}
	return bits != 8 || T <= gemmqInt8SmallMaxRows || N*K >= gemmqInt8LargeWeight
}

// gemmqKernels compiles gemmq.cu on first use.
func (b *Backend) gemmqKernels() (*kernels.GEMMQ, error) {
	b.gemmqOnce.Do(func() { b.gemmq, b.gemmqErr = kernels.LoadGEMMQ(b.dev) })
	return b.gemmq, b.gemmqErr
}

// linearFused queues Linear over a packed weight in the tiled layout
// through gemmq.cu (x to fp16, then the fused dequant-GEMM) where it
// applies (gemmqRoutes), not Options.GEMMQOff.
// Its scratch (fusedScratch) is grown when the op is queued, so the op
// carries a graph key. It reports whether it queued the op; failures are
// the backend's.
func (b *Backend) linearFused(d, xt *tensor, wt *weight, bp cuda.DevicePtr, T, N, K int) bool {
	if wt.qt == 0 || b.opts.GEMMQOff || !gemmqRoutes(T, N, K, wt.qbits) {
		return false
	}
	g, err := b.gemmqKernels()
	if err != nil {
		b.fail(fmt.Errorf("backend/gpu: Linear: weight %s: %w", wt.name, err))
		return true
	}
	if !g.Reads(T, N, K, wt.qbits, wt.qgroup) {
		return false
	}
	sp, err := b.growKeyed(&b.fqMu, &b.fq, &b.fqBytes, g.ScratchBytes(T, N, K, wt.qbits))
	if err != nil {
		b.fail(fmt.Errorf("backend/gpu: Linear: weight %s: fused scratch: %w", wt.name, err))
		return true
	}
	b.launch("Linear", func(c *cuda.Ctx) error {
		if err := g.Launch(c, b.stream, d.ptr, xt.ptr, wt.qt, wt.qtp, bp, sp, T, N, K, wt.qbits, wt.qgroup); err != nil {
			return fmt.Errorf("weight %s: %w", wt.name, err)
		}
		return nil
	}, u64(d.ptr), u64(xt.ptr), u64(wt.qt), u64(wt.qtp), u64(bp), u64(sp), u64(T), u64(N), u64(K), u64(wt.qbits), u64(wt.qgroup))
	return true
}

// decRows is the list length a q6 GEMV launches with for a list of S
// channels: S, or 0 under the Options.DECNoRows diagnostic.
func (b *Backend) decRows(S int) int {
	if b.opts.DECNoRows {
		return 0
	}
	return S
}
