package kernels

import (
	_ "embed"
	"fmt"
	"slices"

	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/wq"
)

//go:embed gemvq6dec.cu
var gemvq6decSource string

// Session 18 (issue #22, docs/perf/dec.md "Session 18"): DEC inside v6.1.
// gemvq6dec.cu's gemv_q6_dec is v6.1 (gemv_q5's LEAN step over the tiled
// layout, the same bits) with one more warp a CTA that adds the
// compensation of the CTA's own outputs, read from the input-major int4
// residual for a list of selected channels made before the launch: no DEC
// CTAs, no flags, no part buffer, no extra launch. Session 19: backend/gpu
// runs it at one row of x for a packed weight in the tiled layout with a
// device residual (and for a joined group's weights over their residuals
// joined by JoinRows), the list made by DEC.Select first; 'bitdecode bench
// dec --v6' times it per shape. Session 22b (docs/perf/dec.md "Session
// 22b"): a second form (gemv_q6_dec<BITS, S, true>, the tail) forms the
// listed rows' products on every warp of the CTA once the base is done and
// sums them on the DEC warp, the same bits; Launch runs it for long lists.

// gemvq6DECBits are the base code widths gemv_q6_dec is instantiated for
// (v6.1 over the tiled layout: int4 and int3), in its index order.
var gemvq6DECBits = [...]int{4, 3}

// gemvq6DECBuf is gemvq6dec.cu's GEMVQ6DEC_BUF default: bytes of one of the
// DEC warp's two staging buffers (v6.1 int4 at 2 CTAs an SM leaves about
// 3.5 KB a CTA).
const gemvq6DECBuf = 1792

// gemvq6DECTailRows is the list length from which Launch runs the tail
// form at splits 2-8; at split 1 (128 outputs a CTA, a 64-byte slice a
// row: twelve scattered loads a row in the tail) it keeps the DEC warp's.
// Session 22b, call 2 (int4, list given, both forms at every point): the
// tail was faster at 128 rows and more on every split 2-8 shape (q/o and
// k/v k 32, gate/up k 32, down k 16, q|k|v k 32), the DEC warp's at 64-112
// rows or within 0.1 us; at split 1 the DEC warp's up to k 64 (gate|up
// 44.2 against 47.0 us).
const gemvq6DECTailRows = 128

// gemvq6DECPrefetchedRows is the longest list for which Launch keeps the
// DEC warp's form where a warp's whole slice of the base is loaded before
// the dependency wait (gemvq6DECPrefetched: o and k/v at split 8 over K
// 4096). Session 24 (docs/perf/dec.md, H100, the 8B step at 1K): there the
// base after the wait is short (x's loads and the math), so the tail, which
// starts after the base's barrier, is exposed, where the DEC warp starts
// its rows right after the wait: o's DEC cost a layer, DEC warp against
// tail, 4.5 against 8.5 us at k 16 (64 rows), 6.1-7.2 against 8.0-9.5 at
// k 32, 7.2 against 9.6 at k 64 (256 rows); per shape alone (L2 flushed,
// the base streaming after the launch) the tail was the faster from 128
// rows (session 22b). Longer lists keep the tail (the DEC warp's ~40-80
// cycles a row).
const gemvq6DECPrefetchedRows = 256

// gemvq6DECPrefetched reports whether v6.1's base at split S over K loads a
// warp's whole slice of the weights before its dependency wait: early set,
// and the slice's steps no more than the gemvq5Ring − 1 that gemv_q5's
// prologue issues before the wait.
func gemvq6DECPrefetched(bits, K, S int, early bool) bool {
	return early && (gemvq5Steps(bits, K)+S-1)/S <= gemvq5Ring-1
}

// GEMVQ6DECTail is which form of gemv_q6_dec GEMVQ6DEC.Launch runs.
type GEMVQ6DECTail int

// The GEMVQ6DECTail values; the zero value picks by the list's length.
const (
	// TailAuto: the tail from gemvq6DECTailRows selected rows at
	// splits 2-8, but for lists of up to gemvq6DECPrefetchedRows rows
	// where the base is loaded before the wait (gemvq6DECPrefetched).
	TailAuto GEMVQ6DECTail = iota
	// TailNever: the DEC warp sums every row while the base streams
	// (sessions 18-22).
	TailNever
	// TailAlways: every row in the tail, after the base.
	TailAlways
)

// GEMVQ6DEC holds gemv_q6_dec for every base width and split, in both
// forms (the DEC warp's, index 0, and the tail, index 1).
type GEMVQ6DEC struct {
	// Tail picks the form Launch runs (comparisons and tests; both give
	// the same bits).
	Tail GEMVQ6DECTail

	fns     [len(gemvq6DECBits)][len(gemvq4Splits)][2]cuda.Function
	join    cuda.Function           // dec_join_rows
	sel     cuda.Function           // select_q6
	ring    [len(gemvq6DECBits)]int // v6.1's ring bytes of the width
	buf     int                     // one DEC staging buffer's bytes
	threads int                     // the block: v6.1's warps and the DEC warps (GEMVQ6DEC_WARPS)
}

func gemvq6DECExpr(bits, s, tail int) string {
	return fmt.Sprintf("gemvq4::gemv_q6_dec<%d, %d, %t>", bits, s, tail == 1)
}

// LoadGEMVQ6DEC compiles gemvq6dec.cu (gemvq4.cu and gemvq.cu as headers,
// GridDependent as gemvq4.cu) with extra NVRTC options (-DGEMVQ6DEC_BUF=n
// sets the staging buffer, -DGEMVQ6DEC_WARPS=2 a copier and a summer warp).
func LoadGEMVQ6DEC(dev *cuda.Device, opts ...string) (*GEMVQ6DEC, error) {
	const joinExpr, selExpr = "gemvq4::dec_join_rows", "gemvq4::select_q6"
	exprs := []string{joinExpr, selExpr}
	for _, b := range gemvq6DECBits {
		for _, s := range gemvq4Splits {
			exprs = append(exprs, gemvq6DECExpr(b, s, 0), gemvq6DECExpr(b, s, 1))
		}
	}
	// dec.cu without its fused self-test: select_q6 is its select_topk.
	copts := append([]string{"-DDEC_NO_SELFTEST=1"}, opts...)
	mod, err := dev.Compile(program("gemvq6dec.cu", gemvq6decSource, exprs, copts,
		cuda.Header{Name: "gemvq4.cu", Source: gemvq4Source}, cuda.Header{Name: "gemvq.cu", Source: gemvqSource},
		cuda.Header{Name: "dec.cu", Source: decSource}))
	if err != nil {
		return nil, err
	}
	d := &GEMVQ6DEC{buf: gemvq6DECBuf, threads: 32*gemvq4Warps + 32}
	for _, o := range opts {
		var n int
		if _, err := fmt.Sscanf(o, "-DGEMVQ6DEC_BUF=%d", &n); err == nil && n > 0 {
			d.buf = n
		}
		if _, err := fmt.Sscanf(o, "-DGEMVQ6DEC_WARPS=%d", &n); err == nil && n > 0 {
			d.threads = 32*gemvq4Warps + 32*n
		}
	}
	if d.join, err = mod.Function(joinExpr); err != nil {
		return nil, err
	}
	if d.sel, err = mod.Function(selExpr); err != nil {
		return nil, err
	}
	for bi, b := range gemvq6DECBits {
		d.ring[bi] = gemvq5RingBytes(b, opts)
		for si, s := range gemvq4Splits {
			for t := range 2 {
				if d.fns[bi][si][t], err = mod.Function(gemvq6DECExpr(b, s, t)); err != nil {
					return nil, err
				}
			}
		}
	}
	return d, dev.Do(func(c *cuda.Ctx) error {
		for bi := range gemvq6DECBits {
			for si := range gemvq4Splits {
				for _, f := range d.fns[bi][si] {
					if err := c.SetMaxDynamicShared(f, d.shared(bi)); err != nil {
						return fmt.Errorf("kernels: gemvq v6.1 + DEC: %w", err)
					}
				}
			}
		}
		return nil
	})
}

// shared is the dynamic shared memory of width index bi: v6.1's ring and
// the two staging buffers.
func (d *GEMVQ6DEC) shared(bi int) int { return d.ring[bi] + 2*d.buf }

// GEMVQ6DECReads reports whether gemv_q6_dec runs a base of this width and
// group over an [N, K] weight with an int4 residual, and why not: int4 or
// int3 with groups v4 reads, N a multiple of the residual group.
func GEMVQ6DECReads(bits, G, N, K int) error {
	if slices.Index(gemvq6DECBits[:], bits) < 0 || gemvq4Shift(G, K) < 0 {
		return fmt.Errorf("kernels: gemvq v6.1 + DEC: int%d G=%d K=%d has no kernel", bits, G, K)
	}
	if N <= 0 || N%wq.ResidualGroup != 0 {
		return fmt.Errorf("kernels: gemvq v6.1 + DEC: %d outputs are not a positive multiple of %d", N, wq.ResidualGroup)
	}
	return nil
}

// Launch runs gemv_q6_dec at split S over one row of x: tw and tp the base
// weight's tiled layout (GEMVQ.PackTiles), res its int4 residual in device
// memory, sel the nsel selected channels (wq.SelectApprox's list, increasing;
// DEC.Select's for one token). y = LaunchV6's y at the same split and
// early + wq.Compensate's compensation, bit for bit; nsel = 0 gives
// LaunchV6's y. d.Tail picks the form (by default the tail from
// gemvq6DECTailRows rows at splits 2-8, where the base is not wholly loaded
// before the wait or the list is longer than gemvq6DECPrefetchedRows);
// both give the same bits.
func (d *GEMVQ6DEC) Launch(c *cuda.Ctx, st cuda.Stream, y, x, tw, tp, bias, sel cuda.DevicePtr, nsel int, res *DECResidual,
	N, K, bits, G, S int, early bool) error {
	if res == nil || res.N != N {
		return fmt.Errorf("kernels: gemvq v6.1 + DEC: want an int4 residual of [%d, %d]", N, K)
	}
	return d.LaunchPart(c, st, y, x, tw, tp, bias, sel, nsel, res, 0, N, K, bits, G, S, early)
}

// LaunchPart is Launch with a residual res of the outputs [lo, lo + res.N)
// only (lo and res.N multiples of wq.ResidualGroup, within N): those
// outputs get the compensation, the others are LaunchV6's y, bit for bit
// (a joined group whose parts have DEC or not: docs/perf/dec.md,
// "Session 23").
func (d *GEMVQ6DEC) LaunchPart(c *cuda.Ctx, st cuda.Stream, y, x, tw, tp, bias, sel cuda.DevicePtr, nsel int, res *DECResidual, lo,
	N, K, bits, G, S int, early bool) error {
	if err := GEMVQ6DECReads(bits, G, N, K); err != nil {
		return err
	}
	if res == nil || res.Elem != wq.Int4 || res.K != K || res.N <= 0 || lo < 0 || lo+res.N > N ||
		lo%wq.ResidualGroup != 0 || res.N%wq.ResidualGroup != 0 {
		return fmt.Errorf("kernels: gemvq v6.1 + DEC: want an int4 residual of [%d, %d] for outputs from a multiple of %d within %d", K, max(N-lo, 0), wq.ResidualGroup, N)
	}
	if nsel < 0 || nsel > K {
		return fmt.Errorf("kernels: gemvq v6.1 + DEC: %d selected channels of %d", nsel, K)
	}
	bi, si := slices.Index(gemvq6DECBits[:], bits), slices.Index(gemvq4Splits[:], S)
	if si < 0 {
		return fmt.Errorf("kernels: gemvq v6.1 + DEC: split %d is not one of %v", S, gemvq4Splits)
	}
	rows := gemvq4Rows * gemvq4Warps / S
	return c.Launch(d.fns[bi][si][d.form(nsel, S, gemvq6DECPrefetched(bits, K, S, early))], cuda.Dim3{X: N / rows}, cuda.Dim3{X: d.threads}, d.shared(bi), st,
		x, tw, tp, bias, y, int32(N), int32(K), int32(gemvq4Shift(G, K)), flagArg(early), int32(d.ring[bi]),
		sel, int32(nsel), res.Words, res.Params, int32(lo), int32(res.N))
}

// form is the index of the form Launch runs for nsel selected channels at
// split S, the base's weights loaded before the wait where prefetched
// (gemvq6DECPrefetched): 1, the tail, or 0, the DEC warp's.
func (d *GEMVQ6DEC) form(nsel, S int, prefetched bool) int {
	switch {
	case d.Tail == TailAlways:
		return 1
	case d.Tail == TailAuto && S > 1 && nsel >= gemvq6DECTailRows && !(prefetched && nsel <= gemvq6DECPrefetchedRows):
		return 1
	default:
		return 0
	}
}

// Select is DEC.Select (each token's list, wq.SelectApprox, to l.Sel: the
// same kernel body, the same bits) as a programmatic dependent that lets
// the launch after it start at once (gemvq6dec.cu's select_q6): a
// gemv_q6_dec launch next is resident, its first weight loads in flight,
// while the selection runs, and reads the list after its dependency wait.
// With k_chunk 0 it launches nothing.
func (d *GEMVQ6DEC) Select(c *cuda.Ctx, st cuda.Stream, l *DECLaunch) error {
	S, err := l.check(false)
	if err != nil || S == 0 {
		return err
	}
	chunks := (l.R.K + wq.ChunkChannels - 1) / wq.ChunkChannels
	return c.Launch(d.sel, cuda.Dim3{X: chunks, Y: l.T}, cuda.Dim3{X: wq.ChunkChannels}, 0, st, l.args(S, 0))
}

// gemvq6DECJoinThreads and gemvq6DECJoinBlocks are dec_join_rows' block and
// most CTAs (a grid-stride copy).
const (
	gemvq6DECJoinThreads = 256
	gemvq6DECJoinBlocks  = 1024
)

// JoinRows copies the K rows of w uint32 words at src (one after another)
// to words [off, off + w) of the K rows of dw words at dst, on stream st:
// a weight's int4 residual rows (w = N/8 code words, or N/128 (scale, zero)
// pairs) into the residual of a joined group of weights (dw = ΣN/8 or
// ΣN/128, off the weight's first output /8 or /128), so that the joined
// residual is wq's packed Rᵀ of the joined [ΣN, K] weight.
func (d *GEMVQ6DEC) JoinRows(c *cuda.Ctx, st cuda.Stream, dst, src cuda.DevicePtr, K, w, dw, off int) error {
	if K <= 0 || w <= 0 || off < 0 || off+w > dw {
		return fmt.Errorf("kernels: gemvq v6.1 + DEC: %d rows of %d words at %d of %d do not fit", K, w, off, dw)
	}
	blocks := min((K*w+gemvq6DECJoinThreads-1)/gemvq6DECJoinThreads, gemvq6DECJoinBlocks)
	return c.Launch(d.join, cuda.Dim3{X: blocks}, cuda.Dim3{X: gemvq6DECJoinThreads}, 0, st,
		src, dst, int32(K), int32(w), int32(dw), int32(off))
}

// Info returns gemv_q6_dec's resources for a width and split (the form
// d.Tail names; TailAuto: the DEC warp's), and the CTAs an SM holds at its
// shared memory.
func (d *GEMVQ6DEC) Info(c *cuda.Ctx, bits, S int) (cuda.FuncInfo, int, error) {
	bi, si := slices.Index(gemvq6DECBits[:], bits), slices.Index(gemvq4Splits[:], S)
	if bi < 0 || si < 0 {
		return cuda.FuncInfo{}, 0, fmt.Errorf("kernels: gemvq v6.1 + DEC: no kernel for int%d split %d", bits, S)
	}
	f := d.fns[bi][si][0]
	if d.Tail == TailAlways {
		f = d.fns[bi][si][1]
	}
	fi, err := c.FuncInfo(f)
	if err != nil {
		return fi, 0, err
	}
	n, err := c.MaxActiveBlocksPerSM(f, d.threads, d.shared(bi))
	return fi, n, err
}
