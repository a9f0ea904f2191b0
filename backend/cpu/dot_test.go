package cpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/internal/cpufeat"
	"github.com/bitdecode/bitdecode/internal/half"
	"github.com/bitdecode/bitdecode/wq"
)

// storedWeight is a test matrix in one storage format: its bytes as a
// checkpoint stores them and the exact float32 values they stand for.
type storedWeight struct {
	format wformat
	group  int       // wI8
	data   []byte    // F32/F16/BF16 elements, or I8 codes
	scales []byte    // wI8: fp16 scales [N, K/group]
	vals   []float32 // the exact values, row-major [N, K]
}

// makeStored draws an [N, K] weight of realistic scale (std 0.05, a few
// x10-x50 outliers) in format f.
func makeStored(r *rand.Rand, f wformat, group, N, K int) storedWeight {
	s := storedWeight{format: f, group: group, vals: make([]float32, N*K)}
	for i := range s.vals {
		v := float32(r.NormFloat64() * 0.05)
		if r.IntN(100) == 0 {
			v *= float32(10 + r.IntN(41))
		}
		switch f {
		case wF32:
			s.data = binary.LittleEndian.AppendUint32(s.data, math.Float32bits(v))
		case wF16:
			h := half.FromFloat32(v)
			s.data = binary.LittleEndian.AppendUint16(s.data, h)
			v = half.ToFloat32(h)
		case wBF16:
			h := half.BF16FromFloat32(v)
			s.data = binary.LittleEndian.AppendUint16(s.data, h)
			v = half.BF16ToFloat32(h)
		}
		s.vals[i] = v
	}
	if f == wI8 {
		s.data = make([]byte, N*K)
		for n := range N {
			for g := range K / group {
				sc := half.FromFloat32(float32(0.0005 + 0.002*r.Float64()))
				s.scales = binary.LittleEndian.AppendUint16(s.scales, sc)
				for k := g * group; k < (g+1)*group; k++ {
					q := int8(r.IntN(255) - 127)
					s.data[n*K+k] = byte(q)
					s.vals[n*K+k] = float32(q) * half.ToFloat32(sc)
				}
			}
		}
	}
	return s
}

// load makes the weight on b: through LoadWeight (a copy) or the in-place
// views.
func (s storedWeight) load(t *testing.T, b *Backend, N, K int, view bool) backend.Weight {
	t.Helper()
	var w backend.Weight
	var err error
	switch s.format {
	case wI8:
		w, err = b.LoadInt8WeightView("w", []int{N, K}, s.data, s.scales, s.group)
	default:
		dt := map[wformat]backend.DType{wF32: backend.F32, wF16: backend.F16, wBF16: backend.BF16}[s.format]
		if view {
			w, err = b.LoadWeightView("w", dt, []int{N, K}, s.data)
		} else {
			w, err = b.LoadWeight("w", dt, []int{N, K}, s.data)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// activations returns T·K values of about unit size with a few outlier
// input channels (x10-x50 on every token), as hidden states have.
func activations(r *rand.Rand, T, K int) []float32 {
	scale := make([]float32, K)
	for k := range scale {
		scale[k] = 1
		if r.IntN(40) == 0 {
			scale[k] = float32(10 + r.IntN(41))
		}
	}
	x := make([]float32, T*K)
	for i := range x {
		x[i] = float32(r.NormFloat64()) * scale[i%K]
	}
	return x
}

// canonicalTol bounds the error of the canonical order (dot.go) against the
// exact sum: every term passes through at most K/16 lane adds, the 4 tree
// adds, the K%16 tail adds, its own product rounding and the bias add, each
// a relative error of at most 2⁻²⁴ of a partial sum bounded by Σ|x·w| + |b|.
func canonicalTol(x, w []float32, bias float32, K int) float64 {
	var s float64
	for k := range K {
		s += math.Abs(float64(x[k]) * float64(w[k]))
	}
	s += math.Abs(float64(bias))
	depth := K/dotLanes + 4 + K%dotLanes + 2
	return float64(depth)*0x1p-24*s*1.0001 + 1e-30
}

// TestTilesPresent checks that every SIMD level this CPU runs has the tiles
// of the F32, BF16, F16 and I8 (groups 32, 64, 128) formats and of the
// packed wq int8 and int4 formats, so that the bitwise comparisons of
// TestLinearFormats and TestQuantLinearLevels compare assembly with the
// pure-Go tile rather than the pure-Go tile with itself.
func TestTilesPresent(t *testing.T) {
	formats := []*weight{
		{format: wF32}, {format: wBF16}, {format: wF16},
		{format: wI8, group: 32}, {format: wI8, group: 64}, {format: wI8, group: 128},
	}
	for _, lvl := range cpufeat.Levels()[1:] {
		_, restore := cpufeat.Force(lvl)
		for _, w := range formats {
			if ts, ok := tilesFor(w); !ok || ts.k14 == nil {
				t.Errorf("%v: no tiles for %v (group %d)", lvl, w.format, w.group)
			} else if lvl == cpufeat.AVX512 && w.format == wF32 && ts.k44c == nil {
				t.Errorf("%v: no cached 4x4 F32 tile", lvl)
			}
		}
		for _, e := range []wq.Elem{wq.Int8, wq.Int4} {
			if ts := tileTable[lvl][packedFormats[e].tile]; ts.k11 == nil || ts.k14 == nil {
				t.Errorf("%v: no packed tiles for %v", lvl, e)
			}
		}
		restore()
	}
}

// TestLinearFormats checks Linear on every storage format and SIMD level
// against the float64 reference, on awkward shapes (K and N off the vector
// width and the tiles; T = 1, 2, 3, 7, 64, 300), with NaN-poisoned outputs;
// and that every level, both load paths and thread counts 1 and 2 give the
// same bits, and a token alone the same bits as in its batch.
func TestLinearFormats(t *testing.T) {
	type fc struct {
		f     wformat
		group int
	}
	formats := []fc{{wF32, 0}, {wBF16, 0}, {wF16, 0}, {wI8, 32}, {wI8, 64}, {wI8, 128}, {wI8, 48}}
	Ts := []int{1, 2, 3, 7, 64, 300}
	if testing.Short() {
		Ts = []int{1, 3, 7, 64}
	}
	r := rand.New(rand.NewPCG(7, 8))
	for _, f := range formats {
		Ks := []int{1, 15, 16, 33, 300, 512}
		if f.f == wI8 {
			Ks = []int{f.group, 3 * f.group, 1536 / f.group * f.group}
		}
		for _, K := range Ks {
			for _, N := range []int{1, 5, 37, 66} {
				for _, T := range Ts {
					name := fmt.Sprintf("%v_g%d_T%d_K%d_N%d", f.f, f.group, T, K, N)
					t.Run(name, func(t *testing.T) {
						checkLinearFormat(t, r, f.f, f.group, T, K, N)
					})
				}
			}
		}
	}
}

func checkLinearFormat(t *testing.T, r *rand.Rand, f wformat, group, T, K, N int) {
	sw := makeStored(r, f, group, N, K)
	xv := activations(r, T, K)
	bv := make([]float32, N)
	for i := range bv {
		bv[i] = float32(r.NormFloat64())
	}
	withBias := N%2 == 1
	var ref []float32
	for _, lvl := range cpufeat.Levels() {
		_, restore := cpufeat.Force(lvl)
		for _, threads := range []int{1, 2} {
			for _, view := range []bool{false, true} {
				b := New(threads)
				w := sw.load(t, b, N, K, view)
				var bw backend.Weight
				if withBias {
					bw = mustWeight(t, b, "bias", bv, N)
				}
				x := mustTensor(t, b, xv, T, K)
				y := poisoned(t, b, T, N)
				b.Linear(y, x, w, bw)
				got := download(t, b, y)
				if ref == nil {
					for i, v := range got {
						tt, n := i/N, i%N
						want := 0.0
						for k := range K {
							want += float64(xv[tt*K+k]) * float64(sw.vals[n*K+k])
						}
						var bias float32
						if withBias {
							bias = bv[n]
							want += float64(bias)
						}
						tol := canonicalTol(xv[tt*K:(tt+1)*K], sw.vals[n*K:(n+1)*K], bias, K)
						if d := math.Abs(float64(v) - want); !(d <= tol) {
							restore()
							t.Fatalf("%v: y[%d,%d] = %v, want %v (err %g, tol %g)", lvl, tt, n, v, want, d, tol)
						}
					}
					ref = got
					continue
				}
				for i, v := range got {
					if math.Float32bits(v) != math.Float32bits(ref[i]) {
						restore()
						t.Fatalf("%v, %d threads, view %v: y[%d,%d] = %v, want the bits of %v (generic, 1 thread)", lvl, threads, view, i/N, i%N, v, ref[i])
					}
				}
			}
		}
		// The last token alone gives its bits in the batch.
		b := New(2)
		w := sw.load(t, b, N, K, true)
		var bw backend.Weight
		if withBias {
			bw = mustWeight(t, b, "bias", bv, N)
		}
		x := mustTensor(t, b, xv[(T-1)*K:], 1, K)
		y := poisoned(t, b, 1, N)
		b.Linear(y, x, w, bw)
		for n, v := range download(t, b, y) {
			if math.Float32bits(v) != math.Float32bits(ref[(T-1)*N+n]) {
				restore()
				t.Fatalf("%v: token %d alone: y[%d] = %v, in the batch %v", lvl, T-1, n, v, ref[(T-1)*N+n])
			}
		}
		restore()
	}
}

// TestEmbeddingFormats checks that Embedding widens every format's rows
// exactly.
func TestEmbeddingFormats(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	const V, K = 11, 64
	for _, f := range []wformat{wF32, wF16, wBF16, wI8} {
		sw := makeStored(r, f, 32, V, K)
		b := New(2)
		w := sw.load(t, b, V, K, true)
		ids := []int32{3, 0, 10, 3}
		d := poisoned(t, b, len(ids), K)
		b.Embedding(d, w, mustInt32(t, b, ids))
		got := download(t, b, d)
		for i, id := range ids {
			for k := range K {
				if got[i*K+k] != sw.vals[int(id)*K+k] {
					t.Fatalf("%v: row %d (id %d), column %d = %v, want %v", f, i, id, k, got[i*K+k], sw.vals[int(id)*K+k])
				}
			}
		}
	}
}

// TestLoadViews checks the in-place loaders: a view shares the caller's
// bytes (aligned data), unaligned data is copied, and bad shapes and sizes
// are errors.
func TestLoadViews(t *testing.T) {
	defer func(on bool) { hugePagesOn = on }(hugePagesOn)
	hugePagesOn = false
	b := New(1)
	buf := make([]byte, 2*4*8+1)
	for i := range buf {
		buf[i] = byte(i)
	}
	w, err := b.LoadWeightView("w", backend.BF16, []int{4, 8}, buf[:64])
	if err != nil {
		t.Fatal(err)
	}
	if cw := w.(*weight); &cw.u16[0] != (*uint16)(unsafePointer(&buf[0])) {
		t.Error("aligned BF16 view: the weight does not share the caller's bytes")
	}
	w, err = b.LoadWeightView("w", backend.BF16, []int{4, 8}, buf[1:65])
	if err != nil {
		t.Fatal(err)
	}
	if cw := w.(*weight); cw.at(0, 0) != half.BF16ToFloat32(binary.LittleEndian.Uint16(buf[1:])) {
		t.Errorf("unaligned BF16 view: element (0,0) = %v", cw.at(0, 0))
	}
	// With huge pages on, every view is a copy of the caller's bytes
	// (aligned or not) where the system gives the memory.
	hugePagesOn = true
	for _, off := range []int{0, 1} {
		w, err := b.LoadWeightView("w", backend.BF16, []int{4, 8}, buf[off:off+64])
		if err != nil {
			t.Fatal(err)
		}
		cw := w.(*weight)
		if cw.chunk == nil {
			t.Logf("no huge-page memory on this system: views stay in place")
			continue
		}
		if &cw.u16[0] == (*uint16)(unsafePointer(&buf[off])) || uintptr(unsafePointer((*byte)(unsafe.Pointer(&cw.u16[0]))))%hugeAlign != 0 {
			t.Errorf("view at offset %d: the copy shares the caller's bytes or is not %d-byte aligned", off, hugeAlign)
		}
		for i := range 32 {
			if got, want := cw.u16[i], binary.LittleEndian.Uint16(buf[off+2*i:]); got != want {
				t.Fatalf("view at offset %d: element %d = %#x, want %#x", off, i, got, want)
			}
		}
		b.FreeWeight(w)
	}
	for _, tc := range []struct {
		shape        []int
		q, sc, group int
	}{
		{[]int{4}, 4, 2, 4},      // not a matrix
		{[]int{2, 8}, 16, 8, 3},  // group does not divide K
		{[]int{2, 8}, 15, 8, 4},  // short codes
		{[]int{2, 8}, 16, 6, 4},  // short scales
		{[]int{2, 8}, 16, 8, 0},  // no group
		{[]int{-1, 8}, 16, 8, 4}, // bad shape
	} {
		if _, err := b.LoadInt8WeightView("q", tc.shape, make([]byte, tc.q), make([]byte, tc.sc), tc.group); err == nil {
			t.Errorf("LoadInt8WeightView(%v, %d codes, %d scale bytes, group %d) succeeded", tc.shape, tc.q, tc.sc, tc.group)
		}
	}
}

// unsafePointer converts a byte pointer for an identity comparison.
func unsafePointer(p *byte) unsafe.Pointer { return unsafe.Pointer(p) }

// TestLinearGroupTiles checks that a grouped Linear (q, k, v-like parts of
// different N sharing x, mixed formats, one with a bias) gives every part
// the bits of a separate Linear call, at every level, thread count and T.
func TestLinearGroupTiles(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	const K = 320
	Ns := []int{130, 66, 66, 5}
	fs := []wformat{wBF16, wF16, wBF16, wF32}
	for _, T := range []int{1, 3, 20} {
		xv := activations(r, T, K)
		bv := make([]float32, Ns[1])
		for i := range bv {
			bv[i] = float32(r.NormFloat64())
		}
		sws := make([]storedWeight, len(Ns))
		for i, N := range Ns {
			sws[i] = makeStored(r, fs[i], 0, N, K)
		}
		for _, lvl := range cpufeat.Levels() {
			_, restore := cpufeat.Force(lvl)
			for _, threads := range []int{1, 2, 3} {
				b := New(threads)
				x := mustTensor(t, b, xv, T, K)
				parts := make([]linearPart, len(Ns))
				var want [][]float32
				for i, N := range Ns {
					w := sws[i].load(t, b, N, K, true)
					var bw backend.Weight
					var bias []float32
					if i == 1 {
						bw, bias = mustWeight(t, b, "bias", bv, N), bv
					}
					y := poisoned(t, b, T, N)
					b.Linear(y, x, w, bw)
					want = append(want, download(t, b, y))
					g := poisoned(t, b, T, N)
					parts[i] = linearPart{y: g.(*tensor).f32, w: w.(*weight), bias: bias}
				}
				b.linearGroup(xv, T, K, parts)
				for i, p := range parts {
					for j, v := range p.y {
						if math.Float32bits(v) != math.Float32bits(want[i][j]) {
							restore()
							t.Fatalf("%v, %d threads, T=%d: part %d y[%d] = %v, want the bits of Linear's %v", lvl, threads, T, i, j, v, want[i][j])
						}
					}
				}
			}
			restore()
		}
	}
}

// TestLinearSplit checks that linearSplit's items cover every output of a
// [T, N] Linear exactly once, in spans of whole tileT-token blocks (at most
// maxSpanBlocks), for decode and prefill sizes and several thread counts.
func TestLinearSplit(t *testing.T) {
	for _, threads := range []int{1, 2, 3, 8} {
		b := New(threads)
		for _, T := range []int{1, 15, 16, 64, 65, 200, 512, 1000} {
			for _, N := range []int{1, 5, 33, 256, 1536} {
				s := b.linearSplit(T, N)
				seen := make([]int, T*N)
				for j := range s.items {
					t0, t1, n0, n1 := s.item(j)
					if t0%tileT != 0 || t0 >= t1 || t1-t0 > maxSpanBlocks*tileT || n0 >= n1 {
						t.Fatalf("threads %d, T=%d N=%d: item %d is [%d,%d)x[%d,%d)", threads, T, N, j, t0, t1, n0, n1)
					}
					for tt := t0; tt < t1; tt++ {
						for n := n0; n < n1; n++ {
							seen[tt*N+n]++
						}
					}
				}
				for i, c := range seen {
					if c != 1 {
						t.Fatalf("threads %d, T=%d N=%d: output [%d,%d] in %d items", threads, T, N, i/N, i%N, c)
					}
				}
			}
		}
	}
}

// TestLinearSpans checks prefill Linears whose work items span several
// tileT-token blocks (one widening of the rows for all of them), cut into
// different spans by different thread counts: every level and thread
// count gives, for every token, the bits of that token alone on the
// pure-Go tile.
func TestLinearSpans(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	const T, K, N = 200, 80, 100 // 4 blocks of tokens, 4 of rows: spans of 4, 2 and 1 blocks at 1, 2 and 8 threads
	xv := activations(r, T, K)
	bv := make([]float32, N)
	for i := range bv {
		bv[i] = float32(r.NormFloat64())
	}
	for _, f := range []wformat{wBF16, wF16, wF32} {
		sw := makeStored(r, f, 0, N, K)
		// The reference: each token alone (T = 1, no widening) on the
		// pure-Go tile.
		_, restore := cpufeat.Force(cpufeat.Generic)
		b := New(1)
		w := sw.load(t, b, N, K, true)
		bw := mustWeight(t, b, "bias", bv, N)
		want := make([]float32, 0, T*N)
		for tt := range T {
			y := poisoned(t, b, 1, N)
			b.Linear(y, mustTensor(t, b, xv[tt*K:(tt+1)*K], 1, K), w, bw)
			want = append(want, download(t, b, y)...)
		}
		restore()
		for _, lvl := range cpufeat.Levels() {
			_, restore := cpufeat.Force(lvl)
			for _, threads := range []int{1, 2, 8} {
				b := New(threads)
				w := sw.load(t, b, N, K, true)
				y := poisoned(t, b, T, N)
				b.Linear(y, mustTensor(t, b, xv, T, K), w, mustWeight(t, b, "bias", bv, N))
				for i, v := range download(t, b, y) {
					if math.Float32bits(v) != math.Float32bits(want[i]) {
						restore()
						t.Fatalf("%v %v, %d threads: y[%d,%d] = %v, want the bits of the token alone %v", f, lvl, threads, i/N, i%N, v, want[i])
					}
				}
			}
			restore()
		}
	}
}

// TestTile4x4 checks every SIMD level's 4×4 tiles (k44 and, where the
// level has it, k44c; their 16 reductions run as one shuffle network since
// v2.22) against its 1×1 tile (one reduction at a time) bit for bit, at k16 = 16 (one step), 32 and 2048, on x rows
// that include NaNs of distinct payloads in every lane (the sums'
// payloads show that every addition keeps its operand order), ±Inf and
// Inf − Inf.
func TestTile4x4(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, lvl := range cpufeat.Levels()[1:] {
		_, restore := cpufeat.Force(lvl)
		for _, f := range []struct {
			f     wformat
			group int
		}{{wF32, 0}, {wBF16, 0}, {wF16, 0}, {wI8, 32}, {wI8, 128}} {
			for _, K := range []int{16, 32, 128, 2048} {
				if f.group > K {
					continue
				}
				b := New(1)
				w := makeStored(r, f.f, f.group, 4, K).load(t, b, 4, K, false).(*weight)
				ts, ok := tilesFor(w)
				if !ok || ts.k44 == nil {
					continue
				}
				x := activations(r, 4, K)
				for l := range dotLanes {
					x[K+l] = math.Float32frombits(0x7fc00000 | uint32(l+1)<<8) // row 1: NaN lanes
				}
				x[2*K+3] = float32(math.Inf(1)) // row 2: +Inf in a lane
				x[3*K+2] = float32(math.Inf(1)) // row 3: Inf − Inf across lanes 2 and 10
				x[3*K+10] = float32(math.Inf(-1))
				var sc *float32
				var ss uintptr
				if w.format == wI8 {
					sc, ss = &w.scales[0], uintptr(4*4)
				}
				xs, ws := uintptr(4*K), uintptr(w.elemSize()*K)
				var want [16]float32
				for rr := range 4 {
					for c := range 4 {
						var csc *float32
						if sc != nil {
							csc = &w.scales[c]
						}
						ts.k11(&x[rr*K], xs, w.rowPtr(c), ws, K, &want[rr*4+c], 16, csc, ss)
					}
				}
				for name, k44 := range map[string]dotFunc{"k44": ts.k44, "k44c": ts.k44c} {
					if k44 == nil {
						continue
					}
					var got [16]float32
					k44(&x[0], xs, w.rowPtr(0), ws, K, &got[0], 16, sc, ss)
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							restore()
							t.Fatalf("%v %v g%d K=%d: %s y[%d,%d] = %#08x, the 1x1 tile's %#08x", lvl, f.f, f.group, K, name, i/4, i%4, math.Float32bits(got[i]), math.Float32bits(want[i]))
						}
					}
				}
			}
		}
		restore()
	}
}
