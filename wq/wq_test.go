package wq

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/bitdecode/bitdecode/internal/half"
)

func TestParseSpec(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{"int4", "int4:g128:rtn:head=int8"},
		{"INT3:gptq", "int3:g128:gptq:head=int8"},
		{"int8:g64", "int8:g64:rtn:head=int8"},
		{"int4:g32:gptq:rtn", "int4:g32:rtn:head=int8"},
		{"fp16", "fp16"},
		{"int3:act", "int3:g128:gptq:act:head=int8"},
		{"bf16", "fp16"},
		{"int4:head=int8", "int4:g128:rtn:head=int8"},
		{"int3:gptq:head=int4:g64", "int3:g64:gptq:head=int4"},
		{"int8:head=int4:head=fp16", "int8:g128:rtn:head=fp16"},
	} {
		s, err := ParseSpec(tc.in)
		if err != nil || s.String() != tc.want {
			t.Errorf("ParseSpec(%q) = %v, %v; want %s", tc.in, s, err, tc.want)
		}
		if back, err := ParseSpec(s.Short()); err != nil || back != s {
			t.Errorf("ParseSpec(%q.Short() = %q) = %v, %v", tc.in, s.Short(), back, err)
		}
	}
	for _, in := range []string{"", "int5", "int4:g100", "int4:gx", "fp16:gptq", "int4:awq", "int4:head=int5", "int4:head", "fp16:head=int8"} {
		_, err := ParseSpec(in)
		var se *SpecError
		if !errors.As(err, &se) || se.Spec != in {
			t.Errorf("ParseSpec(%q) error = %v, want a *SpecError for it", in, err)
		}
	}
}

// refRaw decodes row n, channel k straight from the table of the package
// doc, independently of Matrix.pos.
func refRaw(m *Matrix, n, k int) uint32 {
	row := m.Words[n*m.Elem.RowWords(m.K):]
	switch m.Elem {
	case FP16:
		return row[k/2] >> (16 * (k % 2)) & 0xffff
	case Int8:
		w := row[k/4]
		byteOf := [4]uint{0, 2, 1, 3} // channel k0+i sits in byte byteOf[i]
		return w >> (8 * byteOf[k%4]) & 0xff
	case Int4:
		w := row[k/8]
		i := k % 8
		return w >> (4*(i/2) + 16*(i%2)) & 0xf
	case Int3:
		b := row[3*(k/32) : 3*(k/32)+3]
		i := k % 32
		if i < 30 {
			w := b[i/10]
			r := i % 10
			return w >> (3*(r/2) + 16*(r%2)) & 7
		}
		bit := uint(15)
		if i == 31 {
			bit = 31
		}
		return b[0]>>bit&1 | (b[1]>>bit&1)<<1 | (b[2]>>bit&1)<<2
	}
	return 0
}

func TestLayoutGolden(t *testing.T) {
	// int4, codes 0..7 in channels 0..7: even channels in the low half.
	m, _ := NewMatrix(Int4, 32, 1, 32)
	for k := range 8 {
		m.SetCode(0, k, uint8(k))
	}
	if m.Words[0] != 0x75316420 {
		t.Errorf("int4 word = %#08x, want 0x75316420", m.Words[0])
	}
	// int8, codes 1..4: bytes k0, k0+2, k0+1, k0+3.
	m, _ = NewMatrix(Int8, 32, 1, 32)
	for k := range 4 {
		m.SetCode(0, k, uint8(k+1))
	}
	if m.Words[0] != 0x04020301 {
		t.Errorf("int8 word = %#08x, want 0x04020301", m.Words[0])
	}
	// int3, code 7 in channel 30 only: bit 15 of all three words.
	m, _ = NewMatrix(Int3, 32, 1, 32)
	m.SetCode(0, 30, 7)
	m.SetCode(0, 31, 5) // bits 0 and 2: bit 31 of words 0 and 2
	m.SetCode(0, 13, 6) // word 1, channel 3 of its ten: high half, field 1
	want := [3]uint32{1<<15 | 1<<31, 1<<15 | 6<<(16+3), 1<<15 | 1<<31}
	if [3]uint32(m.Words[:3]) != want {
		t.Errorf("int3 words = %#08x, want %#08x", m.Words[:3], want)
	}
}

func TestPackRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, e := range []Elem{FP16, Int8, Int4, Int3} {
		for _, sh := range [][2]int{{1, 32}, {3, 128}, {5, 384}} {
			N, K := sh[0], sh[1]
			m, err := NewMatrix(e, 32, N, K)
			if err != nil {
				t.Fatal(err)
			}
			mask := uint32(1)<<e.Bits() - 1
			want := make([]uint32, N*K)
			for i := range want {
				want[i] = rng.Uint32() & mask
				if e == FP16 {
					want[i] = uint32(half.FromFloat32(float32(rng.NormFloat64())))
				}
				m.setRaw(i/K, i%K, want[i])
			}
			for i := range m.Params {
				m.Params[i] = half.FromFloat32(float32(rng.NormFloat64() * 0.01))
			}
			row := make([]float32, K)
			strided := make([]float32, 3*K)
			for n := range N {
				m.DequantRow(row, n)
				m.DequantRowStrided(strided, n, 3)
				for k := range K {
					if math.Float32bits(strided[3*k]) != math.Float32bits(row[k]) {
						t.Fatalf("%v (%d,%d): strided %v, DequantRow %v", e, n, k, strided[3*k], row[k])
					}
				}
				for k := range K {
					if got := m.Raw(n, k); got != want[n*K+k] || refRaw(m, n, k) != got {
						t.Fatalf("%v [%d,%d] (%d,%d): Raw %d, doc decode %d, want %d", e, N, K, n, k, got, refRaw(m, n, k), want[n*K+k])
					}
					if a := m.At(n, k); math.Float32bits(a) != math.Float32bits(row[k]) {
						t.Fatalf("%v (%d,%d): DequantRow %v, At %v", e, n, k, row[k], a)
					}
				}
			}
			if got := int64(4*len(m.Words) + 2*len(m.Params)); got != m.Bytes() {
				t.Errorf("%v [%d,%d]: %d bytes allocated, Bytes says %d", e, N, K, got, m.Bytes())
			}
		}
	}
}

func TestBytes(t *testing.T) {
	// Llama-3.1-8B q_proj 4096x4096 at G=128: codes K·b/8 and 4 bytes per group.
	for _, tc := range []struct {
		e    Elem
		want int64
	}{{FP16, 4096 * 4096 * 2}, {Int8, 4096 * (4096 + 32*4)}, {Int4, 4096 * (2048 + 32*4)}, {Int3, 4096 * (1536 + 32*4)}} {
		if got := Bytes(tc.e, 128, 4096, 4096); got != tc.want {
			t.Errorf("Bytes(%v) = %d, want %d", tc.e, got, tc.want)
		}
	}
	if err := Check(Int4, 128, 8, 200); err == nil {
		t.Error("Check accepted K=200 with G=128")
	}
}

// realisticWeight returns an [N, K] weight ~ N(0, 0.02) whose input
// channels in outliers are scaled up (as real checkpoints have a few).
func realisticWeight(rng *rand.Rand, N, K int, outliers map[int]float64) []float32 {
	w := make([]float32, N*K)
	for i := range w {
		s := 0.02
		if f, ok := outliers[i%K]; ok {
			s *= f
		}
		w[i] = float32(rng.NormFloat64() * s)
	}
	return w
}

func TestQuantizeErrorBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	N, K := 24, 512
	w := realisticWeight(rng, N, K, map[int]float64{7: 20, 300: 50})
	for _, e := range []Elem{Int8, Int4, Int3} {
		m, err := Quantize(e, 128, N, K, w)
		if err != nil {
			t.Fatal(err)
		}
		for n := range N {
			for g := 0; g < K/128; g++ {
				vals := make([]float32, 128)
				var absMax float32
				for i := range vals {
					vals[i] = RoundFP16(w[n*K+g*128+i])
					absMax = max(absMax, float32(math.Abs(float64(vals[i]))))
				}
				lo, hi := groupRange(vals)
				s, z, s32 := QuantParams(e, lo, hi)
				if gs, gz := m.Param(n, g); gs != s || gz != z {
					t.Fatalf("%v row %d group %d: params (%#x,%#x), want (%#x,%#x)", e, n, g, gs, gz, s, z)
				}
				bound := ErrorBound(e, s, s32, absMax)
				for i, v := range vals {
					if d := math.Abs(float64(v) - float64(m.At(n, g*128+i))); !(d <= bound) {
						t.Fatalf("%v (%d,%d): |w-ŵ| = %g > bound %g", e, n, g*128+i, d, bound)
					}
				}
			}
		}
	}
	bad := append([]float32(nil), w...)
	bad[5] = float32(math.NaN())
	if _, err := Quantize(Int4, 128, N, K, bad); err == nil {
		t.Error("Quantize accepted a NaN weight")
	}
}

// correlatedInputs returns T activations [T, K] with a shared low-rank
// component (so channels correlate, as real activations do) and a few
// outlier channels.
func correlatedInputs(rng *rand.Rand, T, K int, outliers map[int]float64) []float32 {
	const rank = 8
	basis := make([]float64, rank*K)
	for i := range basis {
		basis[i] = rng.NormFloat64()
	}
	x := make([]float32, T*K)
	for t := range T {
		var c [rank]float64
		for r := range c {
			c[r] = rng.NormFloat64()
		}
		for k := range K {
			v := 0.3 * rng.NormFloat64()
			for r := range rank {
				v += c[r] * basis[r*K+k]
			}
			if f, ok := outliers[k]; ok {
				v *= f
			}
			x[t*K+k] = float32(v)
		}
	}
	return x
}

// outputErr returns Σ_t ||x_t·(W − Ŵ)ᵀ||² in float64.
func outputErr(x []float32, T int, w []float32, m *Matrix) float64 {
	N, K := m.N, m.K
	row := make([]float32, K)
	var s float64
	for n := range N {
		m.DequantRow(row, n)
		for t := range T {
			var d float64
			for k := range K {
				d += float64(x[t*K+k]) * (float64(RoundFP16(w[n*K+k])) - float64(row[k]))
			}
			s += d * d
		}
	}
	return s
}

func TestGPTQBeatsRTN(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	N, K, T := 32, 256, 512
	out := map[int]float64{11: 15, 200: 30}
	w := realisticWeight(rng, N, K, out)
	// Calibrate on the first T tokens; the next T, from the same
	// distribution, measure the gain.
	all := correlatedInputs(rng, 2*T, K, out)
	h := NewHessian(K)
	if err := h.Add(all[:T*K], T); err != nil {
		t.Fatal(err)
	}
	xt := all[T*K:]
	for _, e := range []Elem{Int4, Int3} {
		rtn, err := Quantize(e, 128, N, K, w)
		if err != nil {
			t.Fatal(err)
		}
		er := outputErr(xt, T, w, rtn)
		for _, act := range []bool{false, true} {
			gq, err := QuantizeGPTQ(e, 128, N, K, w, h, GPTQOptions{ActOrder: act})
			if err != nil {
				t.Fatal(err)
			}
			eg := outputErr(xt, T, w, gq)
			t.Logf("%v act-order %v: output error RTN %.4g, GPTQ %.4g (%.2fx lower)", e, act, er, eg, er/eg)
			if !(eg < er) {
				t.Errorf("%v act-order %v: GPTQ output error %g is not below RTN's %g", e, act, eg, er)
			}
		}
	}
	if _, err := QuantizeGPTQ(Int4, 128, N, K, w, NewHessian(K), GPTQOptions{}); err == nil {
		t.Error("QuantizeGPTQ accepted a Hessian without tokens")
	}
}

func TestGPTQFactor(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	K, T := 64, 200
	h := NewHessian(K)
	if err := h.Add(correlatedInputs(rng, T, K, nil), T); err != nil {
		t.Fatal(err)
	}
	u, err := gptqFactor(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Uᵀ U (H + λI) must be the identity.
	var mean float64
	for i := range K {
		mean += h.H[i*K+i]
	}
	damp := gptqDamp * mean / float64(K)
	hij := func(i, j int) float64 {
		v := h.H[min(i, j)*K+max(i, j)]
		if i == j {
			v += damp
		}
		return v
	}
	for i := range K {
		for j := range K {
			var p float64 // (Uᵀ U H)[i][j]
			for a := range K {
				var uu float64
				for b := 0; b <= min(i, a); b++ {
					uu += u[b*K+i] * u[b*K+a]
				}
				p += uu * hij(a, j)
			}
			want := 0.0
			if i == j {
				want = 1
			}
			if math.Abs(p-want) > 1e-8 {
				t.Fatalf("(UᵀU H)[%d][%d] = %g, want %g", i, j, p, want)
			}
		}
	}
}

// llmActivations returns x [K] ~ N(0, 1) with a few channels x20..x50,
// some negative: the outlier pattern of real decoder activations.
func llmActivations(rng *rand.Rand, K int) []float32 {
	x := make([]float32, K)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	for range max(1, K/256) {
		x[rng.IntN(K)] *= float32(20 + 30*rng.Float64())
	}
	return x
}

func TestSelect(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, K := range []int{512, 1536, 4096, 14336} {
		for _, kc := range []int{8, 32, 128} {
			var recall float64
			const trials = 20
			for range trials {
				x := llmActivations(rng, K)
				got := SelectApprox(nil, x, kc)
				want := SelectExact(nil, x, kc)
				if len(got) != len(want) {
					t.Fatalf("K=%d k=%d: %d selected, exact %d", K, kc, len(got), len(want))
				}
				for i := 1; i < len(got); i++ {
					if got[i] <= got[i-1] {
						t.Fatalf("K=%d k=%d: selection not increasing at %d", K, kc, i)
					}
				}
				// The guarantee: per chunk, the smallest selected |x| is within
				// a factor 9/8 (the widest bucket) of the largest unselected
				// one (32 octaves of buckets cover any outlier of this data).
				for c0 := 0; c0 < K; c0 += ChunkChannels {
					c1 := min(K, c0+ChunkChannels)
					in := map[int32]bool{}
					for _, s := range got {
						if int(s) >= c0 && int(s) < c1 {
							in[s] = true
						}
					}
					minSel, maxUn := math.Inf(1), 0.0
					for i := c0; i < c1; i++ {
						if a := math.Abs(float64(x[i])); in[int32(i)] {
							minSel = min(minSel, a)
						} else {
							maxUn = max(maxUn, a)
						}
					}
					if len(in) != ChunkSelect(kc, c1-c0) || minSel*9/8 < maxUn {
						t.Fatalf("K=%d k=%d chunk %d: %d selected, min selected %g, max unselected %g", K, kc, c0, len(in), minSel, maxUn)
					}
				}
				recall += Recall(got, want)
			}
			t.Logf("approximate top-k recall against exact: K=%5d k_chunk=%3d: %.3f", K, kc, recall/trials)
		}
	}
	if n := len(SelectApprox(nil, make([]float32, 100), 0)); n != 0 {
		t.Errorf("k_chunk 0 selected %d channels", n)
	}
}

func TestCompensate(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	N, K := 256, 1536
	w := realisticWeight(rng, N, K, map[int]float64{3: 20})
	q, err := Quantize(Int3, 128, N, K, w)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewResidual(w, q, Int4)
	if err != nil {
		t.Fatal(err)
	}
	x := llmActivations(rng, K)
	sel := SelectApprox(nil, x, 32)
	y := make([]float32, N)
	for n := range y {
		y[n] = float32(rng.NormFloat64())
	}
	base := append([]float32(nil), y...)
	Compensate(y, x, sel, r, nil)
	for n := range N {
		var want, mag float64
		for _, k := range sel {
			a := float64(x[k]) * float64(r.At(int(k), n))
			want += a
			mag += math.Abs(a)
		}
		// Each product rounded once, then len(sel) float32 additions and the
		// final add to the base output.
		bound := float64(len(sel)+2)*0x1p-24*(mag+math.Abs(float64(base[n]))) + 0x1p-24*math.Abs(float64(base[n])+want)
		if d := math.Abs(float64(y[n]) - (float64(base[n]) + want)); !(d <= bound) {
			t.Fatalf("output %d: %v, want %v ± %g", n, y[n], float64(base[n])+want, bound)
		}
	}
}

// TestQuantizeParallel checks that Quantize's row chunks on several
// goroutines give the bytes of one goroutine, for every integer element and
// a row count that leaves a partial chunk, and that its error names the first
// non-finite weight in row order, not the first a goroutine met.
func TestQuantizeParallel(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	const N, K = 3*quantizeRowsChunk + 5, 256
	w := make([]float32, N*K)
	for i := range w {
		w[i] = float32(r.NormFloat64() * 0.02)
	}
	for _, e := range []Elem{Int8, Int4, Int3, FP16} {
		prev := runtime.GOMAXPROCS(1)
		one, err := Quantize(e, 128, N, K, w)
		runtime.GOMAXPROCS(max(4, prev))
		many, err2 := Quantize(e, 128, N, K, w)
		runtime.GOMAXPROCS(prev)
		if err != nil || err2 != nil {
			t.Fatal(err, err2)
		}
		if !slices.Equal(one.Words, many.Words) || !slices.Equal(one.Params, many.Params) {
			t.Errorf("%v: the parallel Quantize differs from one goroutine's", e)
		}
	}
	bad := slices.Clone(w)
	bad[(N-1)*K+3] = float32(math.Inf(1)) // last chunk
	bad[(quantizeRowsChunk+2)*K+7] = float32(math.NaN())
	_, err := Quantize(Int4, 128, N, K, bad)
	if want := fmt.Sprintf("at row %d, column 7", quantizeRowsChunk+2); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("two non-finite weights: err = %v, want the first in row order (%s)", err, want)
	}
}

// BenchmarkQuantize times RTN quantization of a 4096 x 4096 layer of bf16
// values (what a load spends per matrix of an 8B checkpoint), per format.
func BenchmarkQuantize(b *testing.B) {
	const N, K = 4096, 4096
	r := rand.New(rand.NewPCG(5, 6))
	w := make([]float32, N*K)
	for i := range w {
		w[i] = math.Float32frombits(math.Float32bits(float32(r.NormFloat64()*0.02)) &^ 0xffff)
	}
	for _, e := range []Elem{Int8, Int4, Int3} {
		b.Run(e.String(), func(b *testing.B) {
			for b.Loop() {
				if _, err := Quantize(e, 128, N, K, w); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(N*K), "ns/weight")
		})
	}
}

// TestQuantizeCodes checks Quantize's packed codes against the package
// doc's rule, channel by channel (QuantCode of the fp16-rounded weight
// under the group's pair, read back with Raw), for every format and group
// size, on weights that need fp16 rounding or not (bf16-like values,
// float32 ones with low mantissa bits, fp16 subnormals, values past fp16's
// range); and roundFP16's fast path against RoundFP16.
func TestQuantizeCodes(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	const N, K = 7, 512
	w := make([]float32, N*K)
	for i := range w {
		v := float32(r.NormFloat64() * 0.02)
		switch i % 7 {
		case 0:
			v = math.Float32frombits(math.Float32bits(v) &^ 0xffff) // bf16
		case 1:
			v *= 1e-4 // fp16 subnormals
		case 2:
			v *= 1e7 // past fp16's largest
		case 3:
			v = math.Float32frombits(math.Float32bits(v) &^ 0x1fff) // fp16-exact
		}
		w[i] = v
	}
	edges := append(slices.Clone(w[:200]), 0, float32(math.Copysign(0, -1)), 65504, 65520, 65536, 6.1e-5, 6.0e-5, 1e-8, -3e38)
	for e := uint32(100); e <= 150; e++ { // every exponent near fp16's range, fp16-exact mantissas and not
		for _, mant := range []uint32{0, 0x2000, 0x7fe000, 0x400000 | 0x2000, 0x1000} {
			edges = append(edges, math.Float32frombits(e<<23|mant), -math.Float32frombits(e<<23|mant))
		}
	}
	for _, v := range edges {
		if a, b := roundFP16(v), RoundFP16(v); math.Float32bits(a) != math.Float32bits(b) {
			t.Fatalf("roundFP16(%g) = %g, RoundFP16 %g", v, a, b)
		}
	}
	for _, e := range []Elem{Int8, Int4, Int3} {
		for _, G := range []int{32, 128, 256} {
			m, err := Quantize(e, G, N, K, w)
			if err != nil {
				t.Fatal(err)
			}
			for n := range N {
				for k := range K {
					s, z := m.Param(n, k/G)
					if got, want := m.Raw(n, k), uint32(QuantCode(e, RoundFP16(w[n*K+k]), s, z)); got != want {
						t.Fatalf("%v g%d (%d, %d): code %d, want %d", e, G, n, k, got, want)
					}
				}
			}
		}
	}
}

// TestCheckHint: a width the group does not divide is refused with the
// largest valid group that does, if any.
func TestCheckHint(t *testing.T) {
	for _, tc := range []struct {
		e       Elem
		G, K    int
		want    string
		wantErr bool
	}{
		{Int4, 128, 320, "int4:g64", true},
		{Int3, 256, 384, "int3:g128", true},
		{Int8, 64, 96, "int8:g32", true},
		{Int4, 32, 100, "", true}, // no valid group divides 100
		{Int4, 64, 320, "", false},
	} {
		err := Check(tc.e, tc.G, 8, tc.K)
		if (err != nil) != tc.wantErr || err != nil && !strings.Contains(err.Error(), tc.want) || err != nil && tc.want == "" && strings.Contains(err.Error(), "divide it") {
			t.Errorf("Check(%v, g%d, K %d) = %v, want an error %v naming %q", tc.e, tc.G, tc.K, err, tc.wantErr, tc.want)
		}
	}
}
