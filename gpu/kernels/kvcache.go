package kernels

import (
	_ "embed"
	"fmt"

	"github.com/bitdecode/bitdecode/gpu/cuda"
)

//go:embed kvcache.cu
var kvcacheSource string

// kvcThreads is kvcache.cu's kThreads.
const kvcThreads = 256

// KVWriter holds kvcache.cu's kernels: the append of new tokens into fp16
// residual blocks and the random fill of benchmarks.
type KVWriter struct {
	appendFn, appendRotFn, fillFn cuda.Function
	appendRotWarpFn, appendRoPEFn cuda.Function
}

// LoadKVWriter compiles kvcache.cu (once per device).
func LoadKVWriter(dev *cuda.Device) (*KVWriter, error) {
	const ap, ar, fi = "kv_append", "kv_append_rot", "kv_fill_random"
	mod, err := dev.Compile(program("kvcache.cu", kvcacheSource, nil, nil))
	if err != nil {
		return nil, err
	}
	w := &KVWriter{}
	if w.appendFn, err = mod.Function(ap); err != nil {
		return nil, err
	}
	if w.appendRotFn, err = mod.Function(ar); err != nil {
		return nil, err
	}
	if w.fillFn, err = mod.Function(fi); err != nil {
		return nil, err
	}
	if w.appendRotWarpFn, err = mod.Function("kv_append_rot_warp"); err != nil {
		return nil, err
	}
	if w.appendRoPEFn, err = mod.Function("kv_append_rope"); err != nil {
		return nil, err
	}
	return w, nil
}

// Append writes T tokens' keys and values (k, v: [T][Hkv*D] float32) into
// the residual pools resK, resV ([slots][Hkv][Nr][D], kv.MMA order): token t
// goes to slot slot[t] (skipped when negative) at token row row[t] < Nr.
func (w *KVWriter) Append(c *cuda.Ctx, st cuda.Stream, k, v, slot, row, resK, resV cuda.DevicePtr, T, Hkv, D, Nr int) error {
	return w.AppendQ(c, st, 0, 0, 0, k, v, slot, row, resK, resV, T, Hkv, D, Nr)
}

// AppendQ is Append that also converts the nq float32 values at q to fp16
// at qh (the bits of Ops.F32ToF16) in the same launch: attention's query
// for the decode kernels, without a launch of its own.
func (w *KVWriter) AppendQ(c *cuda.Ctx, st cuda.Stream, q, qh cuda.DevicePtr, nq int, k, v, slot, row, resK, resV cuda.DevicePtr, T, Hkv, D, Nr int) error {
	n := max(T*Hkv*D, nq)
	if n <= 0 {
		return nil
	}
	return c.Launch(w.appendFn, cuda.Dim3{X: (n + kvcThreads - 1) / kvcThreads}, cuda.Dim3{X: kvcThreads}, 0, st,
		k, v, slot, row, resK, resV, int32(T), int32(Hkv), int32(D), int32(Nr), q, qh, int64(nq))
}

// AppendRot is AppendQ for a rotated KV format: q ([T][Hq*D] float32; Hq
// 0: none), k and v go through kv.Rotate (rows of D, a power of two) on the
// way to fp16, the bits of Ops.Hadamard on each of them followed by
// AppendQ, in one launch. q, k and v are left as they are, so a batch's
// write rounds may each call it on the same tensors.
func (w *KVWriter) AppendRot(c *cuda.Ctx, st cuda.Stream, q, qh cuda.DevicePtr, Hq int, k, v, slot, row, resK, resV cuda.DevicePtr, T, Hkv, D, Nr int) error {
	if err := checkHadamard("kv_append_rot", T*(Hq+Hkv), D); err != nil {
		return err
	}
	if warpHadamard(D) { // a warp per row, the same bits (decode-step.md v10)
		return c.Launch(w.appendRotWarpFn, cuda.Dim3{X: (T*(Hq+Hkv) + rotWarps - 1) / rotWarps}, cuda.Dim3{X: rotWarps * 32}, 0, st,
			k, v, slot, row, resK, resV, int32(T), int32(Hkv), int32(D), int32(Nr), q, qh, int32(Hq), hadamardScale(D))
	}
	return c.Launch(w.appendRotFn, cuda.Dim3{X: T * (Hq + Hkv)}, cuda.Dim3{X: D / 2}, 2*4*D, st,
		k, v, slot, row, resK, resV, int32(T), int32(Hkv), int32(D), int32(Nr), q, qh, int32(Hq), hadamardScale(D))
}

// RoPEQKV is q, k and v of T tokens as the joined q|k|v GEMM leaves them,
// before biases and RoPE (what Ops.RoPECols reads): Y [T, (Hq + 2·Hkv)·D]
// float32, q's heads, then k's, then v's; BQ [Hq·D], BK and BV [Hkv·D]
// their biases (0: none); Pos [T] int32 and InvFreq [D/2] float32 RoPE's
// positions and inverse frequencies.
type RoPEQKV struct {
	Y, BQ, BK, BV, Pos, InvFreq cuda.DevicePtr
}

// AppendRoPEFits reports whether AppendRoPE takes head dim D: 64, 128 or
// 256 (a warp per head with both halves of each RoPE pair in a lane).
func AppendRoPEFits(D int) bool { return D == 64 || D == 128 || D == 256 }

// AppendRoPE is Ops.RoPECols of src into q, k and v (no norms) followed by
// AppendQ of all of q (rotate false) or AppendRot with Hq heads (rotate
// true), in one launch with the bits of the two (kvcache.cu's
// kv_append_rope): qh [T, Hq·D] fp16 gets q's copy, the residual pools
// the keys and values, and the float32 q, k and v are never written
// (decode-step.md v24). D must fit (AppendRoPEFits).
func (w *KVWriter) AppendRoPE(c *cuda.Ctx, st cuda.Stream, src RoPEQKV, qh cuda.DevicePtr, Hq int, slot, row, resK, resV cuda.DevicePtr, T, Hkv, D, Nr int, rotate bool) error {
	if T <= 0 || Hq <= 0 || Hkv <= 0 || Nr <= 0 || !AppendRoPEFits(D) || src.Y == 0 || src.Pos == 0 || src.InvFreq == 0 || qh == 0 {
		return fmt.Errorf("kernels: kv_append_rope: %d tokens of %d q and %d KV heads of %d (y %#x, qh %#x): want D 64, 128 or 256 and every buffer", T, Hq, Hkv, D, src.Y, qh)
	}
	rows := (Hq + Hkv + rotWarps - 1) / rotWarps
	if T > maxGridX || rows > maxGridY {
		return fmt.Errorf("kernels: kv_append_rope: %d tokens of %d heads: grid too large", T, Hq+Hkv)
	}
	rot := flagArg(rotate)
	return c.Launch(w.appendRoPEFn, cuda.Dim3{X: T, Y: rows}, cuda.Dim3{X: rotWarps * 32}, 4*D, st,
		src.Y, src.BQ, src.BK, src.BV, src.Pos, src.InvFreq, slot, row, resK, resV, qh,
		int32(Hq), int32(Hkv), int32(D), int32(Nr), rot, hadamardScale(D))
}

// FillRandom writes n pseudo-random fp16 KV values (standard deviation
// std, one outlier channel in 16 scaled by 8; rows of D channels) to dst,
// the same for the same seed.
func (w *KVWriter) FillRandom(c *cuda.Ctx, st cuda.Stream, dst cuda.DevicePtr, n, D int, seed uint32, std float32) error {
	if n <= 0 {
		return nil
	}
	return c.Launch(w.fillFn, cuda.Dim3{X: (n + kvcThreads - 1) / kvcThreads}, cuda.Dim3{X: kvcThreads}, 0, st,
		dst, int64(n), int32(D), seed, std)
}
