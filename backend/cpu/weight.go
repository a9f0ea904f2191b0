package cpu

// Weights in their stored precision: a matrix [N, K] keeps the checkpoint's
// elements (F32, F16 or BF16 bit patterns, or int8 codes with per-group
// scales), row-major as stored, and Linear widens them in registers (dot.go).
// LoadWeight copies the bytes it is given (its contract lets the caller
// reuse them); LoadWeightView and LoadInt8WeightView compute on the caller's
// bytes in place, a memory-mapped checkpoint for instance, which the caller
// keeps valid for the weight's life. Vectors (norms, biases, RoPE
// frequencies) are small and are widened to float32 at load.

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/internal/half"
)

// wformat is how a matrix weight's elements are stored.
type wformat uint8

// The storage formats of matrix weights.
const (
	wF32  wformat = iota // float32
	wF16                 // IEEE fp16 bit patterns
	wBF16                // bfloat16 bit patterns
	wI8                  // int8 codes, value q·scale with a scale per group of columns
)

// String names the format as tileFormats and logs do.
func (f wformat) String() string {
	switch f {
	case wF32:
		return "F32"
	case wF16:
		return "F16"
	case wBF16:
		return "BF16"
	case wI8:
		return "I8"
	}
	return fmt.Sprintf("wformat(%d)", uint8(f))
}

// weight is the CPU backend's backend.Weight. A vector holds float32 values
// in f32; a matrix [N, K] holds its row-major elements in the slice of its
// format.
type weight struct {
	owner  *Backend
	name   string
	shape  []int
	format wformat
	f32    []float32 // wF32 matrix, or any vector
	u16    []uint16  // wF16, wBF16 bit patterns
	i8     []int8    // wI8 codes
	// scales holds an I8 matrix's scales transposed, [K/G, N] as float32
	// (exactly the stored fp16 values): group g of row n at scales[g·N+n],
	// so the rows of a SIMD tile read neighbouring scales.
	scales []float32
	group  int // wI8: G, columns per scale
	freed  bool
	rope   *ropeCos // a RoPE inverse-frequency vector's cos/sin table (RoPE)
	// chunk holds the matrix's elements where they were copied into huge
	// pages (hugepages.go); nil otherwise.
	chunk *hugeChunk
}

func (w *weight) Name() string { return w.name }
func (w *weight) Shape() []int { return slices.Clone(w.shape) }

// free drops the weight's memory (FreeWeight).
func (w *weight) free() {
	w.f32, w.u16, w.i8, w.scales, w.rope, w.freed = nil, nil, nil, nil, nil, true
	if w.chunk != nil {
		w.chunk.release()
		w.chunk = nil
	}
}

// elemSize returns the bytes of one stored matrix element.
func (w *weight) elemSize() int {
	switch w.format {
	case wF16, wBF16:
		return 2
	case wI8:
		return 1
	}
	return 4
}

// rowPtr returns the address of row n's first element.
func (w *weight) rowPtr(n int) unsafe.Pointer {
	K := w.shape[1]
	switch w.format {
	case wF16, wBF16:
		return unsafe.Pointer(&w.u16[n*K])
	case wI8:
		return unsafe.Pointer(&w.i8[n*K])
	}
	return unsafe.Pointer(&w.f32[n*K])
}

// i8Value returns the value of code q at row n, column k of an I8 matrix.
func (w *weight) i8Value(q int8, n, k int) float32 {
	return float32(q) * w.scales[(k/w.group)*w.shape[0]+n]
}

// at returns the float32 value of matrix element (n, k).
func (w *weight) at(n, k int) float32 {
	i := n*w.shape[1] + k
	switch w.format {
	case wF16:
		return half.ToFloat32(w.u16[i])
	case wBF16:
		return half.BF16ToFloat32(w.u16[i])
	case wI8:
		return w.i8Value(w.i8[i], n, k)
	}
	return w.f32[i]
}

// row writes the float32 values of matrix row n into dst (len K).
func (w *weight) row(dst []float32, n int) {
	K := w.shape[1]
	switch w.format {
	case wF32:
		copy(dst, w.f32[n*K:(n+1)*K])
	case wF16:
		for k, h := range w.u16[n*K : (n+1)*K] {
			dst[k] = half.ToFloat32(h)
		}
	case wBF16:
		for k, h := range w.u16[n*K : (n+1)*K] {
			dst[k] = half.BF16ToFloat32(h)
		}
	case wI8:
		for k, q := range w.i8[n*K : (n+1)*K] {
			dst[k] = w.i8Value(q, n, k)
		}
	}
}

// hostLittleEndian reports whether this machine stores integers little-
// endian, as safetensors does: only then can 16-bit elements be read in
// place.
var hostLittleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// checkWeight validates a LoadWeight call's dtype, shape and data length.
func checkWeight(name string, dtype backend.DType, shape []int, data []byte) (int, error) {
	n := backend.NumElements(shape)
	if n < 0 {
		return 0, fmt.Errorf("cpu: weight %s: invalid shape %v", name, shape)
	}
	if sz := dtype.Size(); dtype == backend.I32 || sz == 0 {
		return 0, fmt.Errorf("cpu: weight %s: unsupported dtype %v (want F32, F16 or BF16)", name, dtype)
	} else if len(data) != n*sz {
		return 0, fmt.Errorf("cpu: weight %s: %d bytes of data for %v%v (want %d)", name, len(data), dtype, shape, n*sz)
	}
	return n, nil
}

// LoadWeight implements backend.Backend. A matrix (two dimensions) keeps
// its stored elements (copied: F16 and BF16 stay 16-bit); a vector is
// widened to float32.
func (b *Backend) LoadWeight(name string, dtype backend.DType, shape []int, data []byte) (backend.Weight, error) {
	return b.loadWeight(name, dtype, shape, data, false)
}

// LoadWeightView is LoadWeight without the conversion: a matrix weight
// computes on data's bytes as they are (a memory-mapped checkpoint's), copied
// into huge pages where the system gives them (hugepages.go), else in place,
// so data must stay valid and unchanged until the weight is freed. Data that
// is not aligned to its element size, or 16-bit data on a big-endian machine,
// is converted into a copy instead.
func (b *Backend) LoadWeightView(name string, dtype backend.DType, shape []int, data []byte) (backend.Weight, error) {
	return b.loadWeight(name, dtype, shape, data, true)
}

func (b *Backend) loadWeight(name string, dtype backend.DType, shape []int, data []byte, view bool) (backend.Weight, error) {
	n, err := checkWeight(name, dtype, shape, data)
	if err != nil {
		return nil, err
	}
	w := &weight{owner: b, name: name, shape: slices.Clone(shape)}
	if len(shape) != 2 {
		w.f32 = make([]float32, n)
		for i := range w.f32 {
			switch dtype {
			case backend.F32:
				w.f32[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
			case backend.F16:
				w.f32[i] = half.ToFloat32(binary.LittleEndian.Uint16(data[2*i:]))
			case backend.BF16:
				w.f32[i] = half.BF16ToFloat32(binary.LittleEndian.Uint16(data[2*i:]))
			}
		}
		return w, nil
	}
	inPlace := view && hostLittleEndian && uintptr(unsafe.Pointer(unsafe.SliceData(data)))%uintptr(dtype.Size()) == 0
	if view && hostLittleEndian {
		// The view's bytes, copied into huge pages where they can be had.
		if c, chunk := b.huge.copyIn(data); chunk != nil {
			data, w.chunk, inPlace = c, chunk, true
		}
	}
	switch dtype {
	case backend.F32:
		w.format = wF32
		if inPlace {
			w.f32 = unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(data))), n)
		} else {
			w.f32 = make([]float32, n)
			for i := range w.f32 {
				w.f32[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
			}
		}
	case backend.F16, backend.BF16:
		w.format = wF16
		if dtype == backend.BF16 {
			w.format = wBF16
		}
		if inPlace {
			w.u16 = unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(data))), n)
		} else {
			w.u16 = make([]uint16, n)
			for i := range w.u16 {
				w.u16[i] = binary.LittleEndian.Uint16(data[2*i:])
			}
		}
	}
	return w, nil
}

// LoadInt8WeightView makes a matrix weight [N, K] from int8 codes q (N·K
// bytes, row-major) and little-endian fp16 scales [N, K/group]: element
// (n, k) is float32(q[n, k])·scale[n, k/group], the checkpoint int8 format
// of package model. The codes are used as they are: copied into huge pages
// where the system gives them (hugepages.go), else in place (q must then stay
// valid and unchanged until the weight is freed); the scales are copied, as
// float32.
func (b *Backend) LoadInt8WeightView(name string, shape []int, q, scales []byte, group int) (backend.Weight, error) {
	if len(shape) != 2 || backend.NumElements(shape) < 0 {
		return nil, fmt.Errorf("cpu: weight %s: int8 weights must be a matrix, got shape %v", name, shape)
	}
	N, K := shape[0], shape[1]
	if group < 1 || K%group != 0 {
		return nil, fmt.Errorf("cpu: weight %s: group size %d does not divide %d columns", name, group, K)
	}
	G := K / group
	if len(q) != N*K || len(scales) != 2*N*G {
		return nil, fmt.Errorf("cpu: weight %s: %d bytes of codes and %d of scales for [%d, %d] with group %d (want %d and %d)", name, len(q), len(scales), N, K, group, N*K, 2*N*G)
	}
	w := &weight{owner: b, name: name, shape: slices.Clone(shape), format: wI8, group: group}
	q, w.chunk = b.huge.copyIn(q) // the codes, in huge pages where they can be had
	w.i8 = unsafe.Slice((*int8)(unsafe.Pointer(unsafe.SliceData(q))), N*K)
	w.scales = make([]float32, N*G)
	for n := range N {
		for g := range G {
			w.scales[g*N+n] = half.ToFloat32(binary.LittleEndian.Uint16(scales[2*(n*G+g):]))
		}
	}
	return w, nil
}

// unsafePointerU32 returns p as an unsafe.Pointer (a packed word row).
func unsafePointerU32(p *uint32) unsafe.Pointer { return unsafe.Pointer(p) }

// ropeCos is the cos and sin of the RoPE angles pos·invFreq[i] for the
// positions [0, rows), row-major (row pos holds the len(invFreq) angles).
type ropeCos struct {
	rows     int
	cos, sin []float32
}

// ropeTable returns w's table (w a vector of RoPE inverse frequencies)
// covering at least positions [0, rows), growing it (doubling) as longer
// sequences arrive. The table is shared by the ops of one backend, which
// run one at a time.
func (w *weight) ropeTable(rows int) *ropeCos {
	if t := w.rope; t != nil && t.rows >= rows {
		return t
	}
	half := len(w.f32)
	n := max(rows, 2*w.ropeRows(), 64)
	t := &ropeCos{rows: n, cos: make([]float32, n*half), sin: make([]float32, n*half)}
	for pos := range n {
		pf := float32(pos)
		for i, inv := range w.f32 {
			theta := float64(pf * inv)
			t.cos[pos*half+i] = float32(math.Cos(theta))
			t.sin[pos*half+i] = float32(math.Sin(theta))
		}
	}
	w.rope = t
	return t
}

// ropeRows returns the rows of w's current RoPE table (0: none).
func (w *weight) ropeRows() int {
	if w.rope == nil {
		return 0
	}
	return w.rope.rows
}
