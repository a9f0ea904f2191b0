package gpu

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
)

// A mixture of experts on the device (backend.ExpertMixer, moe.cu): the
// router's top-k is computed by a kernel into device memory, and the
// expert GEMVs read each token's expert index from there and the expert's
// weight address from a table of a layer's experts. A decode step queues
// the same launches with the same arguments whatever its tokens choose, so
// it replays as a CUDA graph. From a few rows an expert (moeGrouped) the
// pairs are grouped by expert on the device and each expert runs as one
// tiled GEMM (moe.cu's v2), with launches sized for the worst case, so a
// large decode batch replays too.

// experts is the CUDA backend's backend.Experts: device tables of the
// addresses of one layer's expert matrices (fp16, in place; or packed
// low-bit ones, q).
type experts struct {
	owner  *Backend
	n      int            // E
	H, IE  int            // hidden size, expert width
	k      int            // the experts a token chooses
	tables cuda.DevicePtr // gate[E], up[E], down[E] addresses (uint64); packed: q's words and params tables
	q      *quantExperts  // packed low-bit experts, nil for fp16
}

// quantExperts are a layer's packed low-bit experts (int3, int4, int8 of
// one group size, wq's layout or the tiled one, no DEC): MixExperts runs
// kernels.GEMVQMoE's indexed GEMVs, each (token, slot) the kernel and split
// the host path's one-row Linear runs for that expert (the same bits), so
// a decode step routes on the device and replays as a CUDA graph. The
// tables (experts.tables) hold, for gate, up and down in turn, E words
// addresses and then E params addresses.
type quantExperts struct {
	bits, group int
	gu, down    kernels.ExpertForm // gate and up's form ([IE, H]), down's ([H, IE])
}

// Len implements backend.Experts.
func (e *experts) Len() int { return e.n }

// MaxRows implements backend.ExpertRows: packed experts take a batch of
// fewer than moeGroupRowsPerExpert rows an expert on average (T·k < 4·E,
// where the fp16 experts also run one GEMV per (token, slot)) and at most
// kernels.GEMVQMaxRows tokens; a larger batch re-reads each expert per
// token, so the model routes it on the host (grouped by expert). fp16
// experts take any batch.
func (e *experts) MaxRows() int {
	if e.q == nil {
		return math.MaxInt
	}
	return max(1, min(kernels.GEMVQMaxRows, (moeGroupRowsPerExpert*e.n-1)/e.k))
}

// moeKernels returns moe.cu's kernels, compiling them the first time.
func (b *Backend) moeKernels() (*kernels.MoE, error) {
	b.moeMu.Lock()
	defer b.moeMu.Unlock()
	if b.moe == nil {
		m, err := kernels.LoadMoE(b.dev)
		if err != nil {
			return nil, fmt.Errorf("backend/gpu: kernels for %s: %w", b.dev.Name(), err)
		}
		b.moe = m
	}
	return b.moe, nil
}

// LoadExperts implements backend.ExpertMixer. The experts must be fp16
// matrices, or (unless Options.NoMoEPacked) all packed low-bit ones
// (quantExperts: int3, int4 or int8 of one group size and layout, without
// DEC, whose one-row GEMV has an indexed form, kernels.GEMVQ.ExpertForm):
// the table holds their addresses, so it is made after JoinWeights has
// placed them, and the weights must not move or be freed before
// FreeExperts. The error of a layer it refuses says why; the model routes
// that layer on the host.
func (b *Backend) LoadExperts(gate, up, down []backend.Weight, k int) (backend.Experts, error) {
	E := len(gate)
	if E == 0 || len(up) != E || len(down) != E {
		return nil, fmt.Errorf("backend/gpu: LoadExperts: %d gate, %d up and %d down weights", len(gate), len(up), len(down))
	}
	if k <= 0 || k > min(E, kernels.MoEMaxK) {
		return nil, fmt.Errorf("backend/gpu: LoadExperts: top-%d of %d experts (moe.cu chooses at most %d)", k, E, kernels.MoEMaxK)
	}
	if w0, err := b.weightOf("LoadExperts", gate[0]); err != nil {
		return nil, err
	} else if w0.isQuant() {
		if b.opts.NoMoEPacked {
			return nil, fmt.Errorf("backend/gpu: expert weight %s is packed and their device routing is off (%s)", w0.name, EnvNoMoEPacked)
		}
		return b.loadQuantExperts(gate, up, down, k)
	}
	ex := &experts{owner: b, n: E, k: k}
	table := make([]byte, 3*8*E)
	for i, ws := range [][]backend.Weight{gate, up, down} {
		for e, w := range ws {
			wt, err := b.weightOf("LoadExperts", w)
			if err != nil {
				return nil, err
			}
			if wt.f16 == 0 || wt.q != 0 || wt.qt != 0 || wt.dec != nil || len(wt.shape) != 2 {
				return nil, fmt.Errorf("backend/gpu: expert weight %s is not an fp16 matrix (a layer's experts are all fp16 or all packed)", wt.name)
			}
			N, K := wt.shape[0], wt.shape[1]
			if i == 2 {
				N, K = K, N
			}
			if e == 0 && i == 0 {
				ex.IE, ex.H = N, K
			}
			if N != ex.IE || K != ex.H {
				return nil, &backend.ShapeError{Op: "LoadExperts", Detail: fmt.Sprintf("expert weight %s %v: want [%d, %d] (down transposed)", wt.name, wt.shape, ex.IE, ex.H)}
			}
			binary.LittleEndian.PutUint64(table[8*(i*E+e):], uint64(wt.f16))
		}
	}
	if _, err := b.moeKernels(); err != nil {
		return nil, err
	}
	return b.uploadExperts(ex, table)
}

// uploadExperts copies ex's address table to the device.
func (b *Backend) uploadExperts(ex *experts, table []byte) (backend.Experts, error) {
	err := b.dev.Do(func(c *cuda.Ctx) error {
		var err error
		if ex.tables, err = c.Alloc(len(table)); err != nil {
			return err
		}
		if err := c.HtoDAsync(ex.tables, table, b.stream); err != nil {
			return err
		}
		return b.syncStream(c)
	})
	if err != nil {
		b.FreeExperts(ex)
		return nil, fmt.Errorf("backend/gpu: LoadExperts: %w", err)
	}
	return ex, nil
}

// loadQuantExperts is LoadExperts of packed low-bit experts (quantExperts).
func (b *Backend) loadQuantExperts(gate, up, down []backend.Weight, k int) (backend.Experts, error) {
	E := len(gate)
	g, err := b.quantKernels()
	if err != nil {
		return nil, err
	}
	ex := &experts{owner: b, n: E, k: k, q: &quantExperts{}}
	q := ex.q
	table := make([]byte, 3*2*8*E)
	for i, ws := range [][]backend.Weight{gate, up, down} {
		var tiled bool
		for e, w := range ws {
			wt, err := b.weightOf("LoadExperts", w)
			if err != nil {
				return nil, err
			}
			if !wt.isQuant() || wt.dec != nil || len(wt.shape) != 2 {
				return nil, fmt.Errorf("backend/gpu: expert weight %s is not a packed matrix without DEC (packed experts with DEC have no indexed GEMV; a layer's experts are all fp16 or all packed)", wt.name)
			}
			N, K := wt.shape[0], wt.shape[1]
			if i == 2 {
				N, K = K, N
			}
			if i == 0 && e == 0 {
				ex.IE, ex.H, q.bits, q.group = N, K, wt.qbits, wt.qgroup
			}
			if N != ex.IE || K != ex.H {
				return nil, &backend.ShapeError{Op: "LoadExperts", Detail: fmt.Sprintf("expert weight %s %v: want [%d, %d] (down transposed)", wt.name, wt.shape, ex.IE, ex.H)}
			}
			if wt.qbits != q.bits || wt.qgroup != q.group {
				return nil, fmt.Errorf("backend/gpu: expert weight %s: int%d in groups of %d, the layer's first int%d in groups of %d", wt.name, wt.qbits, wt.qgroup, q.bits, q.group)
			}
			words, params := wt.q, wt.qp
			if e == 0 {
				tiled = wt.qt != 0
			}
			if tiled {
				words, params = wt.qt, wt.qtp
			}
			if (wt.qt != 0) != tiled || words == 0 || params == 0 {
				return nil, fmt.Errorf("backend/gpu: expert weight %s: its layout is not the first expert's", wt.name)
			}
			binary.LittleEndian.PutUint64(table[8*((2*i)*E+e):], uint64(words))
			binary.LittleEndian.PutUint64(table[8*((2*i+1)*E+e):], uint64(params))
		}
		N, K := ex.IE, ex.H
		if i == 2 {
			N, K = K, N
		}
		f, ok := g.ExpertForm(N, K, q.bits, q.group, tiled)
		if !ok {
			return nil, fmt.Errorf("backend/gpu: packed experts [%d, %d] int%d, groups of %d, tiled %v: their one-row GEMV (a GEMVQ knob's form: v4, v5.0, v5.1, v2) has no indexed form", N, K, q.bits, q.group, tiled)
		}
		switch i {
		case 0:
			q.gu = f
		case 1:
			if f != q.gu {
				return nil, fmt.Errorf("backend/gpu: packed experts: gate's GEMV %+v, up's %+v", q.gu, f)
			}
		case 2:
			q.down = f
		}
	}
	if _, err := b.moeKernels(); err != nil {
		return nil, err
	}
	b.moeMu.Lock()
	if b.moeq == nil {
		b.moeq, err = kernels.LoadGEMVQMoE(b.dev)
	}
	b.moeMu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("backend/gpu: kernels for %s: %w", b.dev.Name(), err)
	}
	return b.uploadExperts(ex, table)
}

// FreeExperts implements backend.ExpertMixer. It waits for queued ops,
// which may read the tables.
func (b *Backend) FreeExperts(h backend.Experts) {
	ex, ok := h.(*experts)
	if !ok || ex == nil || ex.owner != b || ex.tables == 0 {
		return
	}
	p := ex.tables
	ex.tables = 0
	_ = b.Do(func(c *cuda.Ctx) error {
		_ = b.syncStream(c)
		return c.Free(p)
	})
}

// moeTensor returns the CUDA tensor behind t, of dtype dt and cols columns
// (its rows returned).
func (b *Backend) moeTensor(op string, t backend.Tensor, dt backend.DType, cols int) (*tensor, int, error) {
	ct, err := b.tensorOf(op, t)
	if err != nil {
		return nil, 0, err
	}
	rows, c := ct.matrix()
	if ct.dtype != dt || c != cols {
		return nil, 0, &backend.ShapeError{Op: op, Detail: fmt.Sprintf("tensor %v: want %v with %d columns", ct, dt, cols)}
	}
	return ct, rows, nil
}

// RouteExperts implements backend.ExpertMixer.
func (b *Backend) RouteExperts(idx, w, logits backend.Tensor, norm bool) {
	const op = "RouteExperts"
	if b.failed() {
		return
	}
	lt, err1 := b.tensorOf(op, logits)
	it, err2 := b.tensorOf(op, idx)
	if err := cmp.Or(err1, err2); err != nil {
		b.fail(err)
		return
	}
	T, E := lt.matrix()
	Ti, k := it.matrix()
	wt, Tw, err := b.moeTensor(op, w, backend.F32, k)
	if err := cmp.Or(err, checkDType(op, lt, backend.F32), checkDType(op, it, backend.I32)); err != nil {
		b.fail(err)
		return
	}
	if Ti != T || Tw != T || k > E {
		b.fail(&backend.ShapeError{Op: op, Detail: fmt.Sprintf("idx %v, w %v for logits %v", it, wt, lt)})
		return
	}
	m := b.moe
	if m == nil {
		b.fail(fmt.Errorf("backend/gpu: %s before LoadExperts", op))
		return
	}
	b.launch(op, func(c *cuda.Ctx) error {
		return m.Route(c, b.stream, it.ptr, wt.ptr, lt.ptr, T, E, k, norm)
	}, u64(it.ptr), u64(wt.ptr), u64(lt.ptr), u64(T), u64(E), u64(k), u64(flag(norm)))
}

// MixExperts implements backend.ExpertMixer.
func (b *Backend) MixExperts(out, x backend.Tensor, h backend.Experts, idx, w, act, shared, sharedGate backend.Tensor) {
	const op = "MixExperts"
	if b.failed() {
		return
	}
	ex, ok := h.(*experts)
	if !ok || ex == nil || ex.owner != b || ex.tables == 0 {
		b.fail(fmt.Errorf("backend/gpu: %s: experts of another backend, or freed", op))
		return
	}
	H, IE, E := ex.H, ex.IE, ex.n
	it, err := b.tensorOf(op, idx)
	if err != nil {
		b.fail(err)
		return
	}
	T, k := it.matrix()
	ot, To, err1 := b.moeTensor(op, out, backend.F32, H)
	xt, Tx, err2 := b.moeTensor(op, x, backend.F32, H)
	wt, Tw, err3 := b.moeTensor(op, w, backend.F32, k)
	at, Ta, err4 := b.moeTensor(op, act, backend.F32, IE)
	if err := cmp.Or(err1, err2, err3, err4, checkDType(op, it, backend.I32)); err != nil {
		b.fail(err)
		return
	}
	if To != T || Tx != T || Tw != T || Ta != T*k || ot == xt {
		b.fail(&backend.ShapeError{Op: op, Detail: fmt.Sprintf("out %v, x %v, idx %v, w %v, act %v", ot, xt, it, wt, at)})
		return
	}
	var sp, sgp cuda.DevicePtr
	if shared != nil {
		st, Ts, err1 := b.moeTensor(op, shared, backend.F32, H)
		gt, Tg, err2 := b.moeTensor(op, sharedGate, backend.F32, 1)
		if err := cmp.Or(err1, err2); err != nil {
			b.fail(err)
			return
		}
		if Ts != T || Tg != T {
			b.fail(&backend.ShapeError{Op: op, Detail: fmt.Sprintf("shared %v, gate %v for %d tokens", st, gt, T)})
			return
		}
		sp, sgp = st.ptr, gt.ptr
	}
	m := b.moe
	if ex.q != nil {
		b.mixQuantExperts(ex, ot, xt, it, wt, at, sp, sgp, T, k)
		return
	}
	gate, up, down := ex.tables, ex.tables+cuda.DevicePtr(8*E), ex.tables+cuda.DevicePtr(16*E)
	if b.moeGrouped(T, k, H, IE, E) {
		l := kernels.MoEGroupedLayout(T*k, E, H, IE)
		buf, err := b.growKeyed(&b.mgMu, &b.mg, &b.mgBytes, l.Bytes)
		if err != nil {
			b.fail(fmt.Errorf("backend/gpu: %s: grouped buffer: %w", op, err))
			return
		}
		ldm, tm := !b.moeNoLDM, b.moeTileRows(T, k, E)
		if !ldm {
			tm = kernels.MoETileRows // the 32-bit loads' only tile
		}
		b.launch(op, func(c *cuda.Ctx) error {
			return m.Grouped(c, b.stream, ot.ptr, xt.ptr, it.ptr, wt.ptr, gate, up, down, sp, sgp, buf, T, k, H, IE, E, ldm, tm)
		}, u64(ot.ptr), u64(xt.ptr), u64(it.ptr), u64(wt.ptr), u64(ex.tables), u64(sp), u64(sgp), u64(buf),
			u64(T), u64(k), u64(H), u64(IE), u64(E), moeGroupedKey, u64(flag(ldm)), u64(tm))
		return
	}
	b.launch(op, func(c *cuda.Ctx) error {
		if err := m.GateUp(c, b.stream, at.ptr, xt.ptr, it.ptr, gate, up, T, k, H, IE, E); err != nil {
			return err
		}
		return m.Down(c, b.stream, ot.ptr, at.ptr, it.ptr, wt.ptr, down, sp, sgp, T, k, H, IE, E)
	}, u64(ot.ptr), u64(xt.ptr), u64(it.ptr), u64(wt.ptr), u64(at.ptr), u64(ex.tables), u64(sp), u64(sgp),
		u64(T), u64(k), u64(H), u64(IE), u64(E))
}

// mixQuantExperts is MixExperts over packed experts: per (token, slot)
// pair p, the indexed GEMVs gate[p] = W_gate[e]·x[t] and up[p] =
// W_up[e]·x[t] (e = idx[p]; one launch, kernels.GEMVQMoE's J = 2), act =
// silu(gate)·up (the backend's SwiGLU), the
// indexed down GEMV ys[p] = W_down[e]·act[p], and moe_combine's weighted sum
// in slot order: each expert's output is the host path's one-row Linear's,
// bit for bit. gate, up and ys live in the grouped path's buffer (mg).
func (b *Backend) mixQuantExperts(ex *experts, ot, xt, it, wt, at *tensor, sp, sgp cuda.DevicePtr, T, k int) {
	const op = "MixExperts"
	H, IE, E, q := ex.H, ex.IE, ex.n, ex.q
	if T > ex.MaxRows() {
		b.fail(fmt.Errorf("backend/gpu: %s: %d tokens over packed experts (at most %d: MaxRows)", op, T, ex.MaxRows()))
		return
	}
	P := T * k
	buf, err := b.growKeyed(&b.mgMu, &b.mg, &b.mgBytes, 4*P*(2*IE+H))
	if err != nil {
		b.fail(fmt.Errorf("backend/gpu: %s: packed experts' buffer: %w", op, err))
		return
	}
	gOut, uOut := buf, buf+cuda.DevicePtr(4*P*IE)
	ys := uOut + cuda.DevicePtr(4*P*IE)
	tab := func(i int) cuda.DevicePtr { return ex.tables + cuda.DevicePtr(8*E*i) }
	m, mq, ops := b.moe, b.moeq, b.ops
	b.launch(op, func(c *cuda.Ctx) error {
		// Gate and up in one launch (their tables and outputs adjacent).
		if err := mq.Launch(c, b.stream, q.gu, gOut, xt.ptr, tab(0), tab(1), it.ptr, 2, P, k, E, IE, H, q.bits, q.group); err != nil {
			return err
		}
		if err := ops.SwiGLU(c, b.stream, at.ptr, gOut, uOut, P*IE); err != nil {
			return err
		}
		if err := mq.Launch(c, b.stream, q.down, ys, at.ptr, tab(4), tab(5), it.ptr, 1, P, 1, E, H, IE, q.bits, q.group); err != nil {
			return err
		}
		return m.Combine(c, b.stream, ot.ptr, ys, wt.ptr, sp, sgp, T, k, H)
	}, u64(ot.ptr), u64(xt.ptr), u64(it.ptr), u64(wt.ptr), u64(at.ptr), u64(ex.tables), u64(sp), u64(sgp), u64(buf),
		u64(T), u64(k), u64(H), u64(IE), u64(E), moeQuantKey)
}

// moeQuantKey tells the packed experts' launch key from the others'.
const moeQuantKey = 3

// moeGroupRowsPerExpert is the default of Options.MoEGroupRows: the
// grouped path from T·k >= moeGroupRowsPerExpert·E pairs (4 rows an expert
// on average: T >= 16 at Mixtral's 8 experts of 2, 64 at Qwen3-30B-A3B's
// 128 of 8). Below, the per-token GEMVs read little more than the chosen
// experts weigh (L2 serves repeats) while the grouped GEMMs pay for tiles
// of 1-2 rows; above, the GEMVs re-read each expert per token (call 1 of
// docs/perf/moe.md's v2: Mixtral T 8 1.27 ms v1, 1.69 grouped; T 16 2.06
// and 1.87; Qwen3 T 32 0.52 and 0.68, T 128 1.53 and 0.78; v3's 16-row
// tiles keep the crossing: Mixtral T 8 1.39, T 16 1.58; Qwen3 T 32 0.61,
// T 64 0.68 against v1's 0.84).
const moeGroupRowsPerExpert = 4

// moeTile16Rows and moeTile32Rows are the largest average rows an expert
// (T·k/E) at which the grouped GEMMs take tiles of 16 and 32 rows (moe.cu
// v3) instead of 64: a small tile's CTA streams faster, while an expert of
// more rows than a tile reads its weights once per tile (L2 shares some of
// it: its tiles run side by side). The fastest tile at every T measured
// (docs/perf/moe.md v3, H100): Mixtral-8x7B T 16-32 16 rows (1.58 ms a
// layer, 64 rows 1.88), T 64 32 rows (1.63; 16 rows 1.94), T 128 and up
// 64; Qwen3-30B-A3B T 64-128 16 rows (683-708 us, 64 rows 768-793), T 256
// 32, T 512 64.
const (
	moeTile16Rows = 8
	moeTile32Rows = 24
)

// moeTileRows returns the grouped GEMMs' tile rows for T tokens of k of E
// experts: b.moeTile where a test set it, else from the average rows an
// expert (the sizes only, so a decode batch keeps its graph).
func (b *Backend) moeTileRows(T, k, E int) int {
	if b.moeTile != 0 {
		return b.moeTile
	}
	switch avg := T * k / E; {
	case avg <= moeTile16Rows:
		return kernels.MoETileRows16
	case avg <= moeTile32Rows:
		return kernels.MoETileRows32
	}
	return kernels.MoETileRows
}

// moeGroupedKey tells the grouped path's launch key from the GEMVs'.
const moeGroupedKey = 2

// moeGrouped says whether MixExperts of T tokens over experts of shape
// H, IE (E of them) takes the grouped path.
func (b *Backend) moeGrouped(T, k, H, IE, E int) bool {
	if H%kernels.MoEGroupedAlign != 0 || IE%kernels.MoEGroupedAlign != 0 || E > kernels.MoEGroupMaxExperts {
		return false
	}
	switch rows := b.opts.MoEGroupRows; {
	case rows < 0:
		return false
	case rows > 0:
		return T >= rows
	}
	return T*k >= moeGroupRowsPerExpert*E
}

// checkDType requires t to be of type dt.
func checkDType(op string, t *tensor, dt backend.DType) error {
	if t.dtype != dt {
		return &backend.ShapeError{Op: op, Detail: fmt.Sprintf("tensor %v: want %v", t, dt)}
	}
	return nil
}

// flag is a key value of a bool.
func flag(v bool) int {
	if v {
		return 1
	}
	return 0
}
