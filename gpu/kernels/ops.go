package kernels

import (
	_ "embed"
	"fmt"
	"math"

	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/wq"
)

//go:embed ops.cu
var opsSource string

// Launch geometry of ops.cu.
const (
	// opsThreads is the block size of the elementwise and gather kernels.
	opsThreads = 256
	// opsMaxBlocks caps the grid of the grid-stride kernels: enough blocks
	// to fill a large GPU several times (132 SMs × 16 resident blocks of 256
	// threads on an H100 is 2112), few enough that huge tensors loop.
	opsMaxBlocks = 4096
	// normMaxThreads is ops.cu's kNormMaxThreads.
	normMaxThreads = 256
	// normCluster and normClusterThreads are ops.cu's kNormCluster and
	// kNormClusterThreads: add_rmsnorm_cluster's CTAs per row and their
	// block size.
	normCluster, normClusterThreads = 8, 128
	// NormClusterMinG and NormClusterMaxG bound the rows AddRMSNorm runs
	// over a cluster (Hopper): from a row where every thread of every CTA
	// has an element to kNormClusterRegs (8) elements per thread.
	NormClusterMinG = normCluster * normClusterThreads
	NormClusterMaxG = 8 * NormClusterMinG
	// maxGridX is the largest grid X dimension CUDA allows.
	maxGridX = 1<<31 - 1
	// maxGridY is the largest grid Y dimension CUDA allows.
	maxGridY = 1<<16 - 1
	// maxRopeShared is the dynamic shared memory rope and rope_qk may use
	// without opting in (cos and sin of a row's half angles).
	maxRopeShared = 48 << 10
)

// Ops holds the compiled kernels of ops.cu: the conversions, gathers,
// RMSNorm, RoPE, SwiGLU and adds of a forward pass. Every launch method
// queues one kernel on stream s of the Ctx's device and returns the launch
// error; pointers are device addresses of whole buffers the caller owns,
// laid out as ops.cu documents. Methods must be called inside Device.Do.
type Ops struct {
	f32ToF16, bf16ToF16, f16ToF32, bf16ToF32 cuda.Function
	embedding, rows, rmsnorm, rope           cuda.Function
	swiglu, add, addBias, fillNormal         cuda.Function
	geglu, scale                             cuda.Function
	hadamard, addRMSNorm, ropeQK             cuda.Function
	splitCols, swigluCols, ropeCols          cuda.Function
	f16ToF32Hadamard, f16ToF32HadamardWarp   cuda.Function
	// addRMSNormCluster is add_rmsnorm_cluster, where the device has
	// thread block clusters (sm_90 and later; hasCluster).
	addRMSNormCluster cuda.Function
	hasCluster        bool
	// addRMSNormClusterSel is add_rmsnorm_cluster_sel (DEC's list where
	// x is produced, session 19b), where the device has clusters;
	// f16ToF32Sel and f16ToF32HadamardSel are o's input with its list
	// (f16_to_f32_sel, f16_to_f32_hadamard_sel), compiled with them.
	addRMSNormClusterSel, f16ToF32Sel, f16ToF32HadamardSel cuda.Function
	// swigluColsSel is swiglu_cols_sel (down's input with its list);
	// swigluSel is swiglu_sel (the same over gate and up apart).
	swigluColsSel, swigluSel cuda.Function
}

// LoadOps compiles ops.cu for dev (once per device; later calls reuse the
// module) and looks its kernels up.
func LoadOps(dev *cuda.Device) (*Ops, error) {
	mod, err := dev.Compile(program("ops.cu", opsSource, nil, nil))
	if err != nil {
		return nil, err
	}
	o := &Ops{}
	for _, k := range []struct {
		f    *cuda.Function
		name string
	}{
		{&o.f32ToF16, "f32_to_f16"}, {&o.bf16ToF16, "bf16_to_f16"},
		{&o.f16ToF32, "f16_to_f32"}, {&o.bf16ToF32, "bf16_to_f32"},
		{&o.embedding, "embedding_f16"}, {&o.rows, "rows_f32"},
		{&o.rmsnorm, "rmsnorm"}, {&o.rope, "rope"},
		{&o.swiglu, "swiglu"}, {&o.add, "add"}, {&o.addBias, "add_bias"},
		{&o.geglu, "geglu"}, {&o.scale, "scale"},
		{&o.fillNormal, "fill_normal_f16"}, {&o.hadamard, "hadamard"},
		{&o.addRMSNorm, "add_rmsnorm"}, {&o.ropeQK, "rope_qk"},
		{&o.f16ToF32Hadamard, "f16_to_f32_hadamard"}, {&o.f16ToF32HadamardWarp, "f16_to_f32_hadamard_warp"},
		{&o.splitCols, "split_cols"}, {&o.swigluCols, "swiglu_cols"}, {&o.ropeCols, "rope_cols"},
	} {
		if *k.f, err = mod.Function(k.name); err != nil {
			return nil, err
		}
	}
	// Compiled only for sm_90 and later (ops.cu's #if): there a missing
	// kernel is an error, not a silent fallback to the one-CTA norm.
	if major, _ := dev.ComputeCapability(); major >= 9 {
		if o.addRMSNormCluster, err = mod.Function("add_rmsnorm_cluster"); err != nil {
			return nil, fmt.Errorf("kernels: ops.cu for %s: %w", dev.Arch(), err)
		}
		o.hasCluster = true
		for _, k := range []struct {
			f    *cuda.Function
			name string
		}{{&o.addRMSNormClusterSel, "add_rmsnorm_cluster_sel"}, {&o.f16ToF32Sel, "f16_to_f32_sel"}, {&o.f16ToF32HadamardSel, "f16_to_f32_hadamard_sel"},
			{&o.swigluColsSel, "swiglu_cols_sel"}, {&o.swigluSel, "swiglu_sel"}} {
			if *k.f, err = mod.Function(k.name); err != nil {
				return nil, fmt.Errorf("kernels: ops.cu for %s: %w", dev.Arch(), err)
			}
		}
	}
	return o, nil
}

// AddRMSNormClusters reports whether AddRMSNorm over rows of G elements
// runs add_rmsnorm_cluster (a row over a cluster of CTAs, with its own
// summation order) rather than add_rmsnorm (rmsnorm's order).
func (o *Ops) AddRMSNormClusters(G int) bool {
	return o.hasCluster && G >= NormClusterMinG && G <= NormClusterMaxG
}

// normSelAlign is the row lengths AddRMSNormSel takes a multiple of: each
// CTA's slice of a row (G/8 elements) a whole number of the 16-byte loads
// through which add_rmsnorm_cluster_sel's CTAs read each other's slices.
const normSelAlign = 4 * normCluster

// AddRMSNormSelects reports whether AddRMSNormSel runs over rows of G
// elements: where AddRMSNorm runs add_rmsnorm_cluster and G is a multiple
// of normSelAlign.
func (o *Ops) AddRMSNormSelects(G int) bool {
	return o.AddRMSNormClusters(G) && G%normSelAlign == 0
}

// AddRMSNormSel is AddRMSNormHalfEarly over a cluster
// (add_rmsnorm_cluster_sel: the same h, x and xh, bit for bit) that also
// writes each row's DEC selection of x, wq.SelectApprox with k_chunk
// kChunk (1 or more), to sel [groups][DECSelected(G, kChunk)] int32: the
// list DEC.Select and GEMVQ6DEC.Select write, with no launch of its own
// (docs/perf/dec.md, session 19b). Only where AddRMSNormSelects(G).
func (o *Ops) AddRMSNormSel(c *cuda.Ctx, s cuda.Stream, h, x, xh, delta, w cuda.DevicePtr, groups, G int, eps float32, early bool,
	sel cuda.DevicePtr, kChunk int) error {
	if err := checkRows("add_rmsnorm_sel", groups, G); err != nil {
		return err
	}
	if !o.AddRMSNormSelects(G) || groups > maxGridX/normCluster {
		return fmt.Errorf("kernels: add_rmsnorm_sel: rows of %d (a cluster, a multiple of %d, %d-%d) x %d", G, normSelAlign,
			NormClusterMinG, NormClusterMaxG, groups)
	}
	if kChunk <= 0 || sel == 0 {
		return fmt.Errorf("kernels: add_rmsnorm_sel: k_chunk %d, list %#x", kChunk, sel)
	}
	kChunk = min(kChunk, wq.ChunkChannels)
	return c.Launch(o.addRMSNormClusterSel, cuda.Dim3{X: groups * normCluster}, cuda.Dim3{X: normClusterThreads}, 0, s,
		h, x, delta, w, int32(G), eps, xh, flagArg(early), sel, int32(DECSelected(G, kChunk)), int32(kChunk))
}

// selectThreads is ops.cu's kSelCTA: the block of the o-input kernels
// with DEC's list (one CTA a 1024-channel chunk of a token).
const selectThreads = 256

// OutSelects reports whether the attention output's conversion over T
// rows of rowLen channels (a token's heads, of D each when rotated; D 0:
// unrotated) can also write DEC's list (F16ToF32Sel, F16ToF32HadamardSel):
// on a device with clusters (sm_90, where gemv_q6_dec runs), D one of the
// warp Hadamard's (32-256) where rotated, rowLen a positive multiple of
// D (and of 4).
func (o *Ops) OutSelects(T, rowLen, D int) bool {
	if !o.hasCluster || T <= 0 || T > maxGridY || rowLen <= 0 || rowLen%4 != 0 {
		return false
	}
	return D == 0 || warpHadamard(D) && rowLen%D == 0
}

// outSelArgs checks an o-input launch with DEC's list and returns its grid
// and the list's stride (wq's selected channels of a row).
func (o *Ops) outSelArgs(op string, T, rowLen, D int, sel cuda.DevicePtr, kChunk int) (cuda.Dim3, int, error) {
	if !o.OutSelects(T, rowLen, D) || sel == 0 || kChunk <= 0 {
		return cuda.Dim3{}, 0, fmt.Errorf("kernels: %s: %d rows of %d (D %d), list %#x, k_chunk %d", op, T, rowLen, D, sel, kChunk)
	}
	kChunk = min(kChunk, wq.ChunkChannels)
	grid := cuda.Dim3{X: (rowLen + wq.ChunkChannels - 1) / wq.ChunkChannels, Y: T}
	return grid, DECSelected(rowLen, kChunk), nil
}

// F16ToF32Sel is F16ToF32 over T rows of rowLen (f16_to_f32_sel: the same
// values) that also writes each row's DEC list, wq.SelectApprox at
// k_chunk kChunk, to sel [T][DECSelected(rowLen, kChunk)] int32: an
// unrotated KV cache's attention output, the input of o's q6 GEMV, whose
// selection launch it replaces (session 19b). Only where
// OutSelects(T, rowLen, 0).
func (o *Ops) F16ToF32Sel(c *cuda.Ctx, s cuda.Stream, dst, src cuda.DevicePtr, T, rowLen int, sel cuda.DevicePtr, kChunk int) error {
	grid, stride, err := o.outSelArgs("f16_to_f32_sel", T, rowLen, 0, sel, kChunk)
	if err != nil {
		return err
	}
	return c.Launch(o.f16ToF32Sel, grid, cuda.Dim3{X: selectThreads}, 0, s, dst, src, int32(rowLen), sel, int32(stride),
		int32(min(kChunk, wq.ChunkChannels)))
}

// F16ToF32HadamardSel is F16ToF32Hadamard over T tokens of rowLen/D rows
// of D (f16_to_f32_hadamard_sel: f16_to_f32_hadamard_warp's bits) that
// also writes each token's DEC list as F16ToF32Sel does: a rotated KV
// cache's attention output. Only where OutSelects(T, rowLen, D).
func (o *Ops) F16ToF32HadamardSel(c *cuda.Ctx, s cuda.Stream, dst, src cuda.DevicePtr, T, rowLen, D int, sel cuda.DevicePtr, kChunk int) error {
	grid, stride, err := o.outSelArgs("f16_to_f32_hadamard_sel", T, rowLen, D, sel, kChunk)
	if err != nil {
		return err
	}
	return c.Launch(o.f16ToF32HadamardSel, grid, cuda.Dim3{X: selectThreads}, 0, s, dst, src, int32(rowLen), int32(D),
		hadamardScale(D), sel, int32(stride), int32(min(kChunk, wq.ChunkChannels)))
}

// elemGrid returns the grid of a grid-stride kernel over n elements.
func elemGrid(n int) cuda.Dim3 {
	return cuda.Dim3{X: max(1, min((n+opsThreads-1)/opsThreads, opsMaxBlocks))}
}

// checkRows validates a one-block-per-row launch.
func checkRows(op string, rows, cols int) error {
	if rows <= 0 || cols <= 0 || rows > maxGridX || cols > maxGridX {
		return fmt.Errorf("kernels: %s: bad shape [%d, %d]", op, rows, cols)
	}
	return nil
}

// checkN validates an elementwise launch over n elements.
func checkN(op string, n int) error {
	if n <= 0 {
		return fmt.Errorf("kernels: %s: %d elements", op, n)
	}
	return nil
}

// F32ToF16 converts n float32 values at src to fp16 at dst, rounding to
// nearest even (values beyond ±65504 become ±Inf).
func (o *Ops) F32ToF16(c *cuda.Ctx, s cuda.Stream, dst, src cuda.DevicePtr, n int) error {
	if err := checkN("f32_to_f16", n); err != nil {
		return err
	}
	return c.Launch(o.f32ToF16, elemGrid(n), cuda.Dim3{X: opsThreads}, 0, s, dst, src, int64(n))
}

// BF16ToF16 converts n bf16 values at src to fp16 at dst (exact for
// |x| <= 65504 down to fp16's subnormals; larger magnitudes become ±Inf).
func (o *Ops) BF16ToF16(c *cuda.Ctx, s cuda.Stream, dst, src cuda.DevicePtr, n int) error {
	if err := checkN("bf16_to_f16", n); err != nil {
		return err
	}
	return c.Launch(o.bf16ToF16, elemGrid(n), cuda.Dim3{X: opsThreads}, 0, s, dst, src, int64(n))
}

// FillNormalF16 writes n pseudo-random fp16 values of standard deviation std
// to dst, a fixed function of (seed, index).
func (o *Ops) FillNormalF16(c *cuda.Ctx, s cuda.Stream, dst cuda.DevicePtr, n int, seed uint32, std float32) error {
	if err := checkN("fill_normal_f16", n); err != nil {
		return err
	}
	return c.Launch(o.fillNormal, elemGrid(n), cuda.Dim3{X: opsThreads}, 0, s, dst, int64(n), seed, std)
}

// F16ToF32 widens n fp16 values at src to float32 at dst (exact).
func (o *Ops) F16ToF32(c *cuda.Ctx, s cuda.Stream, dst, src cuda.DevicePtr, n int) error {
	if err := checkN("f16_to_f32", n); err != nil {
		return err
	}
	return c.Launch(o.f16ToF32, elemGrid(n), cuda.Dim3{X: opsThreads}, 0, s, dst, src, int64(n))
}

// BF16ToF32 widens n bf16 values at src to float32 at dst (exact).
func (o *Ops) BF16ToF32(c *cuda.Ctx, s cuda.Stream, dst, src cuda.DevicePtr, n int) error {
	if err := checkN("bf16_to_f32", n); err != nil {
		return err
	}
	return c.Launch(o.bf16ToF32, elemGrid(n), cuda.Dim3{X: opsThreads}, 0, s, dst, src, int64(n))
}

// EmbeddingF16 gathers dst[t,:] = float(table[ids[t],:]) for dst [T, K]
// float32, table [V, K] fp16 and ids [T] int32. A row whose id is outside
// [0, V) is filled with NaN; callers check ids first.
func (o *Ops) EmbeddingF16(c *cuda.Ctx, s cuda.Stream, dst, table, ids cuda.DevicePtr, T, K, V int) error {
	if err := checkRows("embedding_f16", T, K); err != nil {
		return err
	}
	if V <= 0 || V > maxGridX {
		return fmt.Errorf("kernels: embedding_f16: %d table rows", V)
	}
	return c.Launch(o.embedding, cuda.Dim3{X: T}, cuda.Dim3{X: opsThreads}, 0, s, dst, table, ids, int32(K), int32(V))
}

// Rows gathers dst[r,:] = src[idx[r],:] for dst [R, K], src [T, K] float32
// and idx [R] int32. A row whose index is outside [0, T) is filled with NaN.
func (o *Ops) Rows(c *cuda.Ctx, s cuda.Stream, dst, src, idx cuda.DevicePtr, R, K, T int) error {
	if err := checkRows("rows_f32", R, K); err != nil {
		return err
	}
	if T <= 0 || T > maxGridX {
		return fmt.Errorf("kernels: rows_f32: %d source rows", T)
	}
	return c.Launch(o.rows, cuda.Dim3{X: R}, cuda.Dim3{X: opsThreads}, 0, s, dst, src, idx, int32(K), int32(T))
}

// normThreads returns the block size RMSNorm uses for groups of G elements:
// the next power of two, between 32 and 256. It depends on G only, which is
// what makes the reduction order, and so the result, a function of the
// shape.
func normThreads(G int) int {
	t := 32
	for t < G && t < normMaxThreads {
		t *= 2
	}
	return t
}

// RMSNorm normalizes groups of G consecutive float32 values:
// dst[g,:] = w ⊙ x[g,:] / sqrt(mean(x[g,:]²) + eps) for dst and x
// [groups, G] (dst may equal x) and w [G] float32.
func (o *Ops) RMSNorm(c *cuda.Ctx, s cuda.Stream, dst, x, w cuda.DevicePtr, groups, G int, eps float32) error {
	if err := checkRows("rmsnorm", groups, G); err != nil {
		return err
	}
	return c.Launch(o.rmsnorm, cuda.Dim3{X: groups}, cuda.Dim3{X: normThreads(G)}, 0, s, dst, x, w, int32(G), eps)
}

// AddRMSNorm computes h = h + delta, then x = RMSNorm(h) with weight w
// over groups of G, in one launch. h, x and delta [groups, G] float32 (x
// may equal delta, h neither), w [G] float32. h is exactly Add's. Where
// AddRMSNormClusters(G) a row runs over a cluster of CTAs (ops.cu's
// add_rmsnorm_cluster: its own order of the sum of squares, so x may
// differ from Add then RMSNorm by the ulp of r where the two double sums
// round the float32 mean differently); otherwise with RMSNorm's block and
// order: the bits of Add then RMSNorm.
func (o *Ops) AddRMSNorm(c *cuda.Ctx, s cuda.Stream, h, x, delta, w cuda.DevicePtr, groups, G int, eps float32) error {
	return o.AddRMSNormHalf(c, s, h, x, 0, delta, w, groups, G, eps)
}

// AddRMSNormHalf is AddRMSNorm that also writes F32ToF16 of x to xh
// [groups, G] fp16 where xh is not 0 (the input of a cuBLASLt GEMM after
// it, without a conversion launch; decode-step.md v19). x's bits are
// AddRMSNorm's.
func (o *Ops) AddRMSNormHalf(c *cuda.Ctx, s cuda.Stream, h, x, xh, delta, w cuda.DevicePtr, groups, G int, eps float32) error {
	return o.AddRMSNormHalfEarly(c, s, h, x, xh, delta, w, groups, G, eps, false)
}

// AddRMSNormHalfEarly is AddRMSNormHalf whose cluster kernel, where early
// is set, reads h and w before it waits for the kernel ahead of it on s
// (ops.cu's normLoad), so that those loads overlap that kernel's tail
// instead of opening this one (docs/perf/decode-step.md v21). The caller
// promises that the kernel right ahead writes neither h nor w (a decode
// step's GEMV, which writes delta). The same bits either way; rows that
// do not run over a cluster ignore early.
func (o *Ops) AddRMSNormHalfEarly(c *cuda.Ctx, s cuda.Stream, h, x, xh, delta, w cuda.DevicePtr, groups, G int, eps float32, early bool) error {
	if err := checkRows("add_rmsnorm", groups, G); err != nil {
		return err
	}
	if o.AddRMSNormClusters(G) && groups <= maxGridX/normCluster {
		e := flagArg(early)
		return c.Launch(o.addRMSNormCluster, cuda.Dim3{X: groups * normCluster}, cuda.Dim3{X: normClusterThreads}, 0, s, h, x, delta, w, int32(G), eps, xh, e)
	}
	return c.Launch(o.addRMSNorm, cuda.Dim3{X: groups}, cuda.Dim3{X: normThreads(G)}, 0, s, h, x, delta, w, int32(G), eps, xh)
}

// RoPEQK rotates q [T, Hq·D] and k [T, Hk·D] float32 in place at positions
// pos [T] int32 with invFreq [D/2] float32, as RoPE on each, after
// normalizing every head by qNorm and kNorm [D] float32 as RMSNorm with
// G = D does, where those are non-zero (both or neither): one launch, a
// block per head, with the bits of the separate kernels.
func (o *Ops) RoPEQK(c *cuda.Ctx, s cuda.Stream, q, k, pos, invFreq, qNorm, kNorm cuda.DevicePtr, T, Hq, Hk, half int, eps float32) error {
	if err := checkRows("rope_qk", T, 2*half); err != nil {
		return err
	}
	if Hq <= 0 || Hk <= 0 || Hq+Hk > maxGridY || half <= 0 {
		return fmt.Errorf("kernels: rope_qk: %d q heads and %d k heads of %d", Hq, Hk, 2*half)
	}
	if (qNorm == 0) != (kNorm == 0) {
		return fmt.Errorf("kernels: rope_qk: q norm %#x and k norm %#x: both or neither", qNorm, kNorm)
	}
	shared := 2 * half * 4
	if shared > maxRopeShared {
		return fmt.Errorf("kernels: rope_qk: head dim %d too large", 2*half)
	}
	return c.Launch(o.ropeQK, cuda.Dim3{X: T, Y: Hq + Hk}, cuda.Dim3{X: normThreads(2 * half)}, shared, s,
		q, k, pos, invFreq, qNorm, kNorm, int32(Hq), int32(Hk), int32(half), eps)
}

// maxHadamardDim is the longest row Hadamard transforms (one thread per
// pair, at most 1024 threads per block).
const maxHadamardDim = 2048

// Hadamard applies kv.Rotate (the orthonormal Walsh-Hadamard transform, with
// its rounding) to each of the rows rows of x [rows, D] float32 in place; D
// is a power of two from 2 to maxHadamardDim. A rotated KV format's cache
// rotates q, k and v before attention and the output after (its decode and
// pack kernels never see the rotation).
func (o *Ops) Hadamard(c *cuda.Ctx, s cuda.Stream, x cuda.DevicePtr, rows, D int) error {
	if err := checkHadamard("hadamard", rows, D); err != nil {
		return err
	}
	return c.Launch(o.hadamard, cuda.Dim3{X: rows}, cuda.Dim3{X: D / 2}, 4*D, s, x, int32(D), hadamardScale(D))
}

// F16ToF32Hadamard writes kv.Rotate of each of the rows rows of src [rows,
// D] fp16, widened to float32, to dst [rows, D] float32: F16ToF32 then
// Hadamard in one launch, with their bits (a rotated KV format's attention
// output back from the decode kernels' fp16).
func (o *Ops) F16ToF32Hadamard(c *cuda.Ctx, s cuda.Stream, dst, src cuda.DevicePtr, rows, D int) error {
	return o.F16ToF32HadamardHalf(c, s, dst, 0, src, rows, D)
}

// F16ToF32HadamardHalf is F16ToF32Hadamard that, where dstH is not 0, also
// writes dst's fp16 copy there ([rows, D], F32ToF16's bits): the input of
// a cuBLASLt GEMM queued next (ops.cu v11, decode-step.md v22).
func (o *Ops) F16ToF32HadamardHalf(c *cuda.Ctx, s cuda.Stream, dst, dstH, src cuda.DevicePtr, rows, D int) error {
	if err := checkHadamard("f16_to_f32_hadamard", rows, D); err != nil {
		return err
	}
	if warpHadamard(D) {
		return c.Launch(o.f16ToF32HadamardWarp, cuda.Dim3{X: (rows + rotWarps - 1) / rotWarps}, cuda.Dim3{X: rotWarps * 32}, 0, s,
			dst, src, int32(rows), int32(D), hadamardScale(D), dstH)
	}
	return c.Launch(o.f16ToF32Hadamard, cuda.Dim3{X: rows}, cuda.Dim3{X: D / 2}, 4*D, s, dst, src, int32(D), hadamardScale(D), dstH)
}

// checkHadamard validates a launch of rows Hadamard rows of D elements.
func checkHadamard(op string, rows, D int) error {
	if err := checkRows(op, rows, D); err != nil {
		return err
	}
	if D < 2 || D > maxHadamardDim || D&(D-1) != 0 {
		return fmt.Errorf("kernels: %s: row of %d is not a power of two in [2, %d]", op, D, maxHadamardDim)
	}
	return nil
}

// rotWarps is the warps per block (one row each) of the warp Hadamard
// kernels, bitdecode.cuh's kRotWarps.
const rotWarps = 4

// warpHadamard reports whether rows of D take the one-warp-per-row
// kernels (f16_to_f32_hadamard_warp, kv_append_rot_warp: D/32 values a
// lane, butterflies by warp shuffles; docs/perf/decode-step.md v10):
// D = 32, 64, 128 or 256. Other rows take the one-block-per-row kernels,
// with the same bits.
func warpHadamard(D int) bool { return D == 32 || D == 64 || D == 128 || D == 256 }

// hadamardScale is kv.Rotate's scale of a row of D: float32(1/sqrt(D)).
func hadamardScale(D int) float32 { return float32(1 / math.Sqrt(float64(D))) }

// RoPE rotates x [T, C] float32 in place by the HF Llama rotary embedding
// (rotate_half) with positions pos [T] int32 and inverse frequencies
// invFreq [half] float32; C must be a multiple of the head dim 2·half.
func (o *Ops) RoPE(c *cuda.Ctx, s cuda.Stream, x, pos, invFreq cuda.DevicePtr, T, C, half int) error {
	if err := checkRows("rope", T, C); err != nil {
		return err
	}
	if half <= 0 || C%(2*half) != 0 {
		return fmt.Errorf("kernels: rope: row of %d is not a multiple of the head dim 2·%d", C, half)
	}
	// cos and sin of the row's half angles; 2·half floats stay far below the
	// 48 KiB of dynamic shared memory allowed without opting in for any real
	// head dim (half <= 6144).
	shared := 2 * half * 4
	if shared > maxRopeShared {
		return fmt.Errorf("kernels: rope: head dim %d too large", 2*half)
	}
	return c.Launch(o.rope, cuda.Dim3{X: T}, cuda.Dim3{X: opsThreads}, shared, s, x, pos, invFreq, int32(C), int32(half))
}

// SwiGLU computes dst = silu(gate) ⊙ up elementwise over n float32 values
// (dst may equal gate or up).
func (o *Ops) SwiGLU(c *cuda.Ctx, s cuda.Stream, dst, gate, up cuda.DevicePtr, n int) error {
	if err := checkN("swiglu", n); err != nil {
		return err
	}
	return c.Launch(o.swiglu, elemGrid(n), cuda.Dim3{X: opsThreads}, 0, s, dst, gate, up, int64(n))
}

// GeGLU computes dst = gelu_tanh(gate) ⊙ up elementwise over n float32
// values (dst may equal gate or up), gelu_tanh as bitdecode.cuh's geluTanh
// (in double, rounded once: backend/cpu's geluTanhF64).
func (o *Ops) GeGLU(c *cuda.Ctx, s cuda.Stream, dst, gate, up cuda.DevicePtr, n int) error {
	if err := checkN("geglu", n); err != nil {
		return err
	}
	return c.Launch(o.geglu, elemGrid(n), cuda.Dim3{X: opsThreads}, 0, s, dst, gate, up, int64(n))
}

// Scale computes dst = x·f elementwise over n float32 values (dst may equal
// x).
func (o *Ops) Scale(c *cuda.Ctx, s cuda.Stream, dst, x cuda.DevicePtr, f float32, n int) error {
	if err := checkN("scale", n); err != nil {
		return err
	}
	return c.Launch(o.scale, elemGrid(n), cuda.Dim3{X: opsThreads}, 0, s, dst, x, f, int64(n))
}

// Act is the activation of a gated MLP's gate (SwiGLU's silu, GeGLU's
// gelu_tanh): bitdecode.cuh's kActSiLU and kActGeluTanh.
type Act int32

// The activations.
const (
	ActSiLU     Act = 0 // silu(g) = g/(1 + e^−g): SwiGLU
	ActGeluTanh Act = 1 // gelu_pytorch_tanh: GeGLU (Gemma)
)

// checkGLU is the operand check the fused gate|up launches share (gemv.cu's
// and linear.cu's pair kernels; who names the launch): a known activation,
// gate and up of one width N >= 1, both weights and dst set.
func checkGLU(who string, act Act, gate, up LinearGroup, dst cuda.DevicePtr) error {
	if act != ActSiLU && act != ActGeluTanh {
		return fmt.Errorf("kernels: %s: unknown activation %v", who, act)
	}
	if gate.N < 1 || up.N != gate.N || gate.W == 0 || up.W == 0 || dst == 0 {
		return fmt.Errorf("kernels: %s: gate N = %d, up N = %d (want equal, at least 1), weights and dst set", who, gate.N, up.N)
	}
	return nil
}

// String names the activation.
func (a Act) String() string {
	switch a {
	case ActSiLU:
		return "silu"
	case ActGeluTanh:
		return "gelu_tanh"
	}
	return fmt.Sprintf("Act(%d)", int32(a))
}

// Add computes dst = a + b elementwise over n float32 values (dst may equal
// a or b).
func (o *Ops) Add(c *cuda.Ctx, s cuda.Stream, dst, a, b cuda.DevicePtr, n int) error {
	if err := checkN("add", n); err != nil {
		return err
	}
	return c.Launch(o.add, elemGrid(n), cuda.Dim3{X: opsThreads}, 0, s, dst, a, b, int64(n))
}

// AddBias adds bias [N] to every row of y [T, N] float32 in place.
func (o *Ops) AddBias(c *cuda.Ctx, s cuda.Stream, y, bias cuda.DevicePtr, T, N int) error {
	if T <= 0 || N <= 0 || N > maxGridX {
		return fmt.Errorf("kernels: add_bias: bad shape [%d, %d]", T, N)
	}
	n := T * N
	return c.Launch(o.addBias, elemGrid(n), cuda.Dim3{X: opsThreads}, 0, s, y, bias, int64(n), int32(N))
}

// SplitColsMax is how many outputs SplitCols takes.
const SplitColsMax = 3

// ColsOut is one output of SplitCols or SwiGLUCols: Y [T, N] float32, and
// its bias [N] float32 (0 for none).
type ColsOut struct {
	Y, Bias cuda.DevicePtr
	N       int
}

// colsAligned reports whether a pointer and a width suit split_cols's and
// swiglu_cols's float4 accesses (0 is a pointer that is not read).
func colsAligned(p cuda.DevicePtr, n int) bool { return p%16 == 0 && n > 0 && n%4 == 0 }

// ColsFit reports whether SplitCols and SwiGLUCols take an output of N
// columns: a multiple of 4 (float4 accesses).
func ColsFit(N int) bool { return N > 0 && N%4 == 0 }

// SplitCols copies the columns of y [T, ΣN] float32 (the outputs' N one
// after another, as one GEMM over weights stored one after another computes
// them) into each output's own tensor, adding its bias where set (add_bias's
// bits): one launch for up to SplitColsMax outputs. Every N must be a
// multiple of 4 and every pointer 16-byte aligned; y must not overlap an
// output.
func (o *Ops) SplitCols(c *cuda.Ctx, s cuda.Stream, y cuda.DevicePtr, T int, outs ...ColsOut) error {
	if len(outs) == 0 || len(outs) > SplitColsMax || T <= 0 || !colsAligned(y, 4) {
		return fmt.Errorf("kernels: split_cols: %d outputs of %d rows from %#x", len(outs), T, y)
	}
	var g [SplitColsMax]ColsOut
	N := 0
	for i, out := range outs {
		if !colsAligned(out.Y, out.N) || out.Y == 0 || !colsAligned(out.Bias, out.N) {
			return fmt.Errorf("kernels: split_cols: output %d (%#x, bias %#x) of %d columns: want a multiple of 4 and 16-byte alignment", i, out.Y, out.Bias, out.N)
		}
		g[i] = out
		N += out.N
	}
	n4 := T * N / 4
	return c.Launch(o.splitCols, elemGrid(n4), cuda.Dim3{X: opsThreads}, 0, s, y, g[0].Y, g[1].Y, g[2].Y,
		g[0].Bias, g[1].Bias, g[2].Bias, int32(g[0].N), int32(g[1].N), int32(g[2].N), int64(n4))
}

// SwiGLUCols is SplitCols of y [T, 2N] into gate and up followed by
// SwiGLU(dst, gate, up), in one launch with the bits of the two: gate.Y and
// up.Y may be 0 (not written; the one dst takes the place of), dst may equal
// either. N (gate.N, equal to up.N) must be a multiple of 4, every pointer
// 16-byte aligned, and y must not overlap the outputs.
func (o *Ops) SwiGLUCols(c *cuda.Ctx, s cuda.Stream, y, dst cuda.DevicePtr, T int, gate, up ColsOut) error {
	return o.SwiGLUColsHalf(c, s, y, dst, 0, T, gate, up)
}

// SwiGLUColsHalf is SwiGLUCols that also writes F32ToF16 of dst to dh [T,
// N] fp16 (8-byte aligned) where dh is not 0: the input of the cuBLASLt
// GEMM after it (down), without a conversion launch (decode-step.md v19).
func (o *Ops) SwiGLUColsHalf(c *cuda.Ctx, s cuda.Stream, y, dst, dh cuda.DevicePtr, T int, gate, up ColsOut) error {
	return o.GLUColsHalf(c, s, ActSiLU, y, dst, dh, T, gate, up)
}

// GLUColsHalf is SwiGLUColsHalf with the gate's activation act: ActSiLU
// (SwiGLU's bits) or ActGeluTanh (GeGLU's).
func (o *Ops) GLUColsHalf(c *cuda.Ctx, s cuda.Stream, act Act, y, dst, dh cuda.DevicePtr, T int, gate, up ColsOut) error {
	if act != ActSiLU && act != ActGeluTanh {
		return fmt.Errorf("kernels: swiglu_cols: unknown activation %v", act)
	}
	N := gate.N
	if T <= 0 || up.N != N || !colsAligned(y, 4) || dst == 0 || !colsAligned(dst, N) || dh%8 != 0 ||
		!colsAligned(gate.Y, N) || !colsAligned(up.Y, N) || !colsAligned(gate.Bias, N) || !colsAligned(up.Bias, N) {
		return fmt.Errorf("kernels: swiglu_cols: [%d, 2·%d] (up %d columns) into %#x, %#x, %#x (fp16 %#x): want a multiple of 4 and 16-byte alignment (8 for fp16)", T, N, up.N, dst, gate.Y, up.Y, dh)
	}
	n4 := T * N / 4
	return c.Launch(o.swigluCols, elemGrid(n4), cuda.Dim3{X: opsThreads}, 0, s, y, dst, gate.Y, up.Y,
		gate.Bias, up.Bias, int32(N), int64(n4), dh, int32(act))
}

// GLUSelects reports whether GLUColsSel runs over T rows of N outputs
// (clusters, the sm_90 build where gemv_q6_dec runs; N a multiple of 4).
func (o *Ops) GLUSelects(T, N int) bool {
	return o.hasCluster && T > 0 && T <= maxGridY && N > 0 && N%4 == 0
}

// GLUColsSel is GLUColsHalf without the fp16 copy (swiglu_cols_sel: the
// same dst, gate and up, bit for bit) that also writes each row's DEC list
// of dst, wq.SelectApprox at k_chunk kChunk, to sel [T][DECSelected(N,
// kChunk)] int32: down's input at one row after gate|up's joined GEMV,
// whose list its q6 GEMV then does not select (session 19b). Only where
// GLUSelects(T, N).
func (o *Ops) GLUColsSel(c *cuda.Ctx, s cuda.Stream, act Act, y, dst cuda.DevicePtr, T int, gate, up ColsOut, sel cuda.DevicePtr, kChunk int) error {
	if act != ActSiLU && act != ActGeluTanh {
		return fmt.Errorf("kernels: swiglu_cols_sel: unknown activation %v", act)
	}
	N := gate.N
	if !o.GLUSelects(T, N) || up.N != N || !colsAligned(y, 4) || dst == 0 || !colsAligned(dst, N) ||
		!colsAligned(gate.Y, N) || !colsAligned(up.Y, N) || !colsAligned(gate.Bias, N) || !colsAligned(up.Bias, N) {
		return fmt.Errorf("kernels: swiglu_cols_sel: [%d, 2·%d] (up %d columns) into %#x, %#x, %#x: want clusters, a multiple of 4 and 16-byte alignment", T, N, up.N, dst, gate.Y, up.Y)
	}
	if sel == 0 || kChunk <= 0 {
		return fmt.Errorf("kernels: swiglu_cols_sel: list %#x, k_chunk %d", sel, kChunk)
	}
	kChunk = min(kChunk, wq.ChunkChannels)
	grid := cuda.Dim3{X: (N + wq.ChunkChannels - 1) / wq.ChunkChannels, Y: T}
	return c.Launch(o.swigluColsSel, grid, cuda.Dim3{X: selectThreads}, 0, s, y, dst, gate.Y, up.Y, gate.Bias, up.Bias,
		int32(N), int32(act), sel, int32(DECSelected(N, kChunk)), int32(kChunk))
}

// GLUSel is SwiGLU (act ActSiLU) or GeGLU (ActGeluTanh) over T rows of
// N channels, gate and up apart (swiglu_sel: the same dst, bit for bit;
// dst may be gate or up), that also writes each row's DEC list of dst,
// wq.SelectApprox at k_chunk kChunk, to sel [T][DECSelected(N, kChunk)]
// int32: down's input at one row where gate and up run as two GEMVs (no
// DEC on them, so not joined), whose q6 GEMV then needs no select_q6
// launch (session 24, docs/perf/dec.md). Only where GLUSelects(T, N), and
// dst, gate and up 16-byte aligned.
func (o *Ops) GLUSel(c *cuda.Ctx, s cuda.Stream, act Act, dst, gate, up cuda.DevicePtr, T, N int, sel cuda.DevicePtr, kChunk int) error {
	if act != ActSiLU && act != ActGeluTanh {
		return fmt.Errorf("kernels: swiglu_sel: unknown activation %v", act)
	}
	if !o.GLUSelects(T, N) || dst == 0 || dst%16 != 0 || gate%16 != 0 || up%16 != 0 || gate == 0 || up == 0 {
		return fmt.Errorf("kernels: swiglu_sel: [%d, %d] at %#x, %#x into %#x: want clusters, a multiple of 4 and 16-byte alignment", T, N, gate, up, dst)
	}
	if sel == 0 || kChunk <= 0 {
		return fmt.Errorf("kernels: swiglu_sel: list %#x, k_chunk %d", sel, kChunk)
	}
	kChunk = min(kChunk, wq.ChunkChannels)
	grid := cuda.Dim3{X: (N + wq.ChunkChannels - 1) / wq.ChunkChannels, Y: T}
	return c.Launch(o.swigluSel, grid, cuda.Dim3{X: selectThreads}, 0, s, dst, gate, up, int32(N), int32(act), sel,
		int32(DECSelected(N, kChunk)), int32(kChunk))
}

// ropeColsVBlocks is how many blocks of a rope_cols row copy v's columns.
const ropeColsVBlocks = 2

// RoPECols is SplitCols of y [T, q.N + k.N + v.N] into q, k and v (v.Y 0
// and v.N 0 for none) followed by RoPEQK without norms of q [T, Hq·D] and
// k [T, Hk·D] (D = 2·half) at positions pos [T] int32 with invFreq [half]
// float32, in one launch with the bits of the two (ops.cu's rope_cols;
// decode-step.md v19). q.N and k.N must be multiples of D, v.N and the
// row of y multiples of 4; y, v and v's bias 16-byte aligned; y must not
// overlap an output.
func (o *Ops) RoPECols(c *cuda.Ctx, s cuda.Stream, y, pos, invFreq cuda.DevicePtr, T, half int, q, k, v ColsOut) error {
	D := 2 * half
	bad := T <= 0 || half <= 0 || q.Y == 0 || k.Y == 0 || q.N <= 0 || k.N <= 0 || q.N%D != 0 || k.N%D != 0 ||
		(q.N+k.N+v.N)%4 != 0 || !colsAligned(y, 4) || v.N < 0 || (v.N == 0) != (v.Y == 0) ||
		(v.N > 0 && (!colsAligned(v.Y, v.N) || !colsAligned(v.Bias, v.N)))
	if bad {
		return fmt.Errorf("kernels: rope_cols: [%d, %d + %d + %d] into %#x, %#x, %#x, head dim %d: want q and k whole heads, v a multiple of 4 columns and 16-byte alignment", T, q.N, k.N, v.N, q.Y, k.Y, v.Y, D)
	}
	Hq, Hk := q.N/D, k.N/D
	vb := 0
	if v.N > 0 {
		vb = ropeColsVBlocks
	}
	if err := checkRows("rope_cols", T, D); err != nil {
		return err
	}
	if Hq+Hk+vb > maxGridY || 2*half*4 > maxRopeShared {
		return fmt.Errorf("kernels: rope_cols: %d q heads and %d k heads of %d", Hq, Hk, D)
	}
	return c.Launch(o.ropeCols, cuda.Dim3{X: T, Y: Hq + Hk + vb}, cuda.Dim3{X: normThreads(D)}, 2*half*4, s,
		y, q.Y, k.Y, v.Y, q.Bias, k.Bias, v.Bias, pos, invFreq, int32(Hq), int32(Hk), int32(v.N), int32(half))
}
