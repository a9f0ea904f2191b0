package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/bitdecode/bitdecode/internal/cpufeat"
	"github.com/bitdecode/bitdecode/internal/half"
	"github.com/bitdecode/bitdecode/wq"
)

// TestQuantLinearLevels checks the packed-weight Linear (the packed order
// for int8, int4 and int3 with groups of 128, int4 also on its opt-in
// integer path, dequantized tiles otherwise) at every
// SIMD level and thread counts 1 and 2 against the float64 reference over
// Ŵ, on ragged N and T = 1, 2, 3, 7, 64, 300 with NaN-poisoned outputs, and
// that every level and thread count gives the bits of the pure-Go tile.
func TestQuantLinearLevels(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	Ts := []int{1, 2, 3, 7, 64, 300}
	if testing.Short() {
		Ts = []int{1, 3, 7, 64}
	}
	for _, e := range []wq.Elem{wq.Int8, wq.Int4, wq.Int3, wq.FP16} {
		for _, G := range []int{128, 64} {
			for _, sh := range []struct{ K, N int }{{128, 5}, {384, 37}, {512, 66}, {1024, 9}} {
				for _, T := range Ts {
					t.Run(fmt.Sprintf("%v_g%d_T%d_K%d_N%d", e, G, T, sh.K, sh.N), func(t *testing.T) {
						checkQuantLevels(t, r, e, G, T, sh.K, sh.N)
					})
				}
			}
		}
	}
}

func checkQuantLevels(t *testing.T, r *rand.Rand, e wq.Elem, G, T, K, N int) {
	for _, on := range []bool{false, true} {
		if on && !((e == wq.Int4 || e == wq.Int8) && G == int4Group) {
			continue
		}
		func() {
			int4IntegerOn = on
			defer func() { int4IntegerOn = false }()
			checkQuantLevelsMode(t, r, e, G, T, K, N)
		}()
	}
}

func checkQuantLevelsMode(t *testing.T, r *rand.Rand, e wq.Elem, G, T, K, N int) {
	m, err := wq.Quantize(e, G, N, K, llmWeight(r, N, K))
	if err != nil {
		t.Fatal(err)
	}
	wh := dequantized(m)
	xv := activations(r, T, K)
	bv := make([]float32, N)
	for i := range bv {
		bv[i] = float32(r.NormFloat64())
	}
	refs := map[intPath][]float32{}
	for _, lvl := range cpufeat.Levels() {
		_, restore := cpufeat.Force(lvl)
		for _, threads := range []int{1, 2} {
			b := New(threads)
			w := mustQuant(t, b, m, nil)
			// int3 takes its integer path only where VNNI and VBMI are
			// active, int8 where VNNI is; each path has its reference bits.
			path := w.(*qweight).integerPath()
			x := mustTensor(t, b, xv, T, K)
			y := poisoned(t, b, T, N)
			b.Linear(y, x, w, mustWeight(t, b, "bias", bv, N))
			got := download(t, b, y)
			if refs[path] == nil {
				for i, v := range got {
					tt, n := i/N, i%N
					want := float64(bv[n])
					for k := range K {
						want += float64(xv[tt*K+k]) * float64(wh[n*K+k])
					}
					tol := canonicalTol(xv[tt*K:(tt+1)*K], wh[n*K:(n+1)*K], bv[n], K)
					if path != pathNone {
						tol = baseTol(m, xv[tt*K:(tt+1)*K], wh, n, true) + 0x1p-24*math.Abs(want)
					}
					if d := math.Abs(float64(v) - want); !(d <= tol) {
						restore()
						t.Fatalf("%v (integer path %v): y[%d,%d] = %v, want %v (err %g, tol %g)", lvl, path, tt, n, v, want, d, tol)
					}
				}
				refs[path] = got
				continue
			}
			ref := refs[path]
			for i, v := range got {
				if math.Float32bits(v) != math.Float32bits(ref[i]) {
					restore()
					t.Fatalf("%v, %d threads: y[%d,%d] = %v, want the bits of %v (the first level of its path, 1 thread)", lvl, threads, i/N, i%N, v, ref[i])
				}
			}
		}
		restore()
	}
}

// TestPackedPermutation checks each packed order's channel map against
// wq's layout (Matrix.Raw): the field f of lane l that a tile decodes holds
// the code of channel chans[16f+l], on random codes, and the map covers
// every channel of a chunk once.
func TestPackedPermutation(t *testing.T) {
	r := rand.New(rand.NewPCG(33, 34))
	for e, p := range packedFormats {
		K := p.ch
		m, err := wq.NewMatrix(e, packedGroup, 1, max(K, packedGroup))
		if err != nil {
			t.Fatal(err)
		}
		for k := range K {
			m.SetCode(0, k, uint8(r.Uint32()&p.mask))
		}
		for i, ch := range p.chans {
			f, l := i/dotLanes, i%dotLanes
			var got uint32
			switch {
			case !p.int3:
				got = m.Words[l] >> p.shifts[f] & p.mask
			case f == 30:
				w := m.Words[3*l : 3*l+3]
				got = w[0]>>15&1 | w[1]>>14&2 | w[2]>>13&4
			case f == 31:
				w := m.Words[3*l : 3*l+3]
				got = w[0]>>31&1 | w[1]>>30&2 | w[2]>>29&4
			default:
				got = m.Words[3*l+f/10] >> int3Shift(f) & 7
			}
			if want := m.Raw(0, ch); got != want {
				t.Errorf("%v: field %d of lane %d decodes %d, want channel %d's code %d", e, f, l, got, ch, want)
			}
		}
		seen := map[int]bool{}
		for _, ch := range p.chans {
			seen[ch] = true
		}
		if len(seen) != K || len(p.chans) != K {
			t.Errorf("%v: the map has %d entries covering %d of %d channels", e, len(p.chans), len(seen), K)
		}
	}
}

// baseTol bounds |y − Σ x·ŵ| for row n of m and token row x (len K) on
// the quantized Linear's own arithmetic (integer: the integer int4 or int3
// path): linearTol for the float orders;
// for int4 with groups of 128 (qint4.go) the rounding of x to its codes in
// blocks of 8 (int3: 32; each code off by at most sx/2, weighted by |ŵ|: the path
// computes the dot product of the quantized x with Ŵ) plus the float32
// combination: products, lane sums over K/128 groups, the tree, the z·X̂
// sum and the bias (depth K/128 + 7), and each X̂'s one rounding.
func baseTol(m *wq.Matrix, x, wh []float32, n int, integer bool) float64 {
	K := m.K
	if !integer {
		return linearTol(x, wh[n*K:(n+1)*K], 0, 0, K)
	}
	const u = 0x1p-24
	// x's blocks and the depth of the float32 combination: int4 sums K/128
	// groups per lane, then the tree, z·X̂ and the bias; int3 (qint3.go)
	// 3 per chunk of 512, the tree, the z·X̂ of 4 lanes and the bias.
	// int8 (qint8.go) blocks channels by int8XPerm and rounds float32(D)
	// once more.
	B, depth := 8, K/int4Group+7
	block := func(g, b int) []int { // the channels of block b of group g
		ks := make([]int, B)
		for j := range ks {
			ks[j] = g*int4Group + B*b + j
		}
		return ks
	}
	switch m.Elem {
	case wq.Int3:
		B, depth = 32, 3*K/int3Chunk+4+K/int4Group+3
	case wq.Int8:
		depth++
		block = func(g, b int) []int {
			ks := make([]int, B)
			for j := range ks {
				ks[j] = g*int4Group + int8XPerm[B*b+j]
			}
			return ks
		}
	}
	var quant, terms, xsumErr float64
	for g := 0; g < K/int4Group; g++ {
		s16, z16 := m.Param(n, g)
		s, z := float64(half.ToFloat32(s16)), float64(half.ToFloat32(z16))
		var absXh float64 // Σ|x̂| ≤ Σ (|x| + sx/2)
		for b := 0; b < int4Group/B; b++ {
			ks := block(g, b)
			var amax float32
			for _, k := range ks {
				amax = max(amax, float32(math.Abs(float64(x[k]))))
			}
			sx := float64(amax / int4XMax)
			for _, k := range ks {
				sq := s * float64(m.Raw(n, k))
				xh := math.Abs(float64(x[k])) + sx/2
				quant += math.Abs(float64(wh[n*K+k])) * sx / 2
				terms += sq * xh
				absXh += xh
			}
		}
		terms += math.Abs(z) * absXh
		xsumErr += math.Abs(z) * u * absXh
	}
	return quant + float64(depth)*u*terms + xsumErr + 1e-30
}

// TestQuantizeInt4X checks the integer int4 path's x codes at every SIMD
// level (the same bits as the Go reference, quantizeInt4XGeneric): both int8
// terms within ±127, the code c = 254·q1 + q2 within sx/2 of x/sx·sx (each
// channel off by at most half its block's step, max|x|/64516), the scale
// max|x|/32258 per block of 8, the group sums X̂ of the quantized x (one
// rounding of the exact Σ sx·c), an all-zero block all zero, a block
// whose scale underflows, subnormal and huge values, and a block with an
// Inf or NaN scaled by NaN.
func TestQuantizeInt4X(t *testing.T) {
	r := rand.New(rand.NewPCG(35, 36))
	const K = 768
	x := activations(r, 1, K)
	x[9] = 0x1p-130 // a subnormal beside normal values
	for k := 16; k < 24; k++ {
		x[k] = 0
	}
	x[30] = 0x1p-149                   // a block whose scale underflows to 0
	x[40], x[41] = 0x1p-128, -0x1p-127 // subnormal scale
	x[50] = 3e38
	x[300] = float32(math.Inf(-1))
	x[333] = float32(math.NaN())
	x[420] = float32(math.Inf(1))
	for k := 512; k < K; k++ { // ties of x/sx and of c/254 (x = m·max/32258)
		x[k] = float32(r.IntN(2*int4XMax+1)-int4XMax) * (1.5 / int4XMax)
		if k%8 == 0 {
			x[k] = 1.5
		}
	}
	want := int4Token{xq: make([]int8, 2*K), sx: make([]float32, K/8), xsum: make([]float32, K/int4Group)}
	quantizeInt4XGeneric(want, x)
	for _, lvl := range cpufeat.Levels() {
		_, restore := cpufeat.Force(lvl)
		tok := int4Token{xq: make([]int8, 2*K), sx: make([]float32, K/8), xsum: make([]float32, K/int4Group)}
		for i := range tok.xq {
			tok.xq[i] = int8(r.Uint32())
		}
		quantizeInt4X(tok, x, make([]int32, K/8))
		restore()
		same := func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) || a != a && b != b }
		for i := range tok.xq {
			if tok.xq[i] != want.xq[i] {
				t.Fatalf("%v: code byte %d = %d, want %d (Go)", lvl, i, tok.xq[i], want.xq[i])
			}
		}
		for i := range tok.sx {
			if !same(tok.sx[i], want.sx[i]) {
				t.Fatalf("%v: sx[%d] = %v, want %v (Go)", lvl, i, tok.sx[i], want.sx[i])
			}
		}
		for i := range tok.xsum {
			if !same(tok.xsum[i], want.xsum[i]) {
				t.Fatalf("%v: X̂[%d] = %v, want %v (Go)", lvl, i, tok.xsum[i], want.xsum[i])
			}
		}
	}
	tok := want
	order := [8]int{0, 4, 1, 5, 2, 6, 3, 7}
	for g := 0; g < K/int4Group; g++ {
		var sum float64 // X̂: Σ sx·c, exact in float64 here
		for l := range dotLanes {
			k0 := g*int4Group + 8*l
			var amax float32
			for _, v := range x[k0 : k0+8] {
				amax = max(amax, float32(math.Abs(float64(v))))
			}
			sx := tok.sx[g*dotLanes+l]
			if amax > math.MaxFloat32 || amax != amax {
				if !math.IsNaN(float64(sx)) {
					t.Errorf("block %d holds %v: sx = %v, want NaN", k0/8, x[k0:k0+8], sx)
				}
				sum = math.NaN()
				continue
			}
			if want := amax / int4XMax; sx != want {
				t.Errorf("block %d: sx = %v, want %v", k0/8, sx, want)
			}
			for i, ch := range order {
				at := 2*g*int4Group + (i/4)*64 + 4*l + i%4
				q1, q2 := tok.xq[at], tok.xq[at+128]
				if q1 < -127 || q2 < -127 {
					t.Fatalf("channel %d: terms %d, %d out of [-127, 127]", k0+ch, q1, q2)
				}
				c := int4XRatio*float64(q1) + float64(q2)
				sum += c * float64(sx)
				v := float64(x[k0+ch])
				if d := math.Abs(c*float64(sx) - v); !(d <= float64(sx)/2*(1+0x1p-20)) {
					t.Errorf("channel %d: x = %v, codes %d·%d + %d at sx %v give %v (off by %g > sx/2)", k0+ch, v, int4XRatio, q1, q2, sx, c*float64(sx), d)
				}
			}
		}
		if want := float32(sum); math.Float32bits(want) != math.Float32bits(tok.xsum[g]) && !(math.IsNaN(float64(want)) && math.IsNaN(float64(tok.xsum[g]))) {
			t.Errorf("group %d: X̂ = %v, want %v", g, tok.xsum[g], want)
		}
	}
}

// TestConfigureInt4 checks EnvInt4: unset, empty or "int8dot" select the
// integer int4 path, "float" the float packed order, anything else fails
// naming the variable; and that a weight takes the path set at its load.
func TestConfigureInt4(t *testing.T) {
	defer func() { int4IntegerOn = true }()
	m, err := wq.Quantize(wq.Int4, int4Group, 4, 256, llmWeight(rand.New(rand.NewPCG(37, 38)), 4, 256))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		set  bool
		val  string
		want bool
	}{{set: false, want: true}, {set: true, val: "", want: true}, {set: true, val: "int8dot", want: true}, {set: true, val: "float", want: false}} {
		int4IntegerOn = !tc.want
		env := func(k string) (string, bool) {
			if k == EnvInt4 && tc.set {
				return tc.val, true
			}
			return "", false
		}
		if err := configure(env); err != nil {
			t.Fatalf("%q: %v", tc.val, err)
		}
		w := mustQuant(t, New(1), m, nil).(*qweight)
		if on := w.path == pathInt4; int4IntegerOn != tc.want || on != tc.want {
			t.Errorf("%s=%q (set %v): integer path %v, weight %v; want %v", EnvInt4, tc.val, tc.set, int4IntegerOn, on, tc.want)
		}
	}
	err = configure(func(k string) (string, bool) { return "int4dot", k == EnvInt4 })
	if err == nil || !strings.Contains(err.Error(), EnvInt4) {
		t.Errorf("a bad value: error %v, want one naming %s", err, EnvInt4)
	}
}

// TestInt3Integer checks the integer int3 path's VNNI + VBMI tiles against
// its Go reference, bit for bit, and both against the float64 reference over
// Ŵ within the bound of x's codes (baseTol), on ragged N, T = 1 and 3, K =
// 512 to 2048; and that a token holding an Inf gives NaN in every output.
func TestInt3Integer(t *testing.T) {
	r := rand.New(rand.NewPCG(39, 40))
	for _, sh := range []struct{ T, K, N int }{{1, 512, 37}, {3, 1536, 66}, {2, 2048, 9}} {
		m, err := wq.Quantize(wq.Int3, 128, sh.N, sh.K, llmWeight(r, sh.N, sh.K))
		if err != nil {
			t.Fatal(err)
		}
		wh := dequantized(m)
		pz := packedFormats[wq.Int3].params(m)
		xv := activations(r, sh.T, sh.K)
		C := sh.K / int3Chunk
		toks := make([]int3Token, sh.T)
		for i := range toks {
			toks[i] = int3Token{xq: make([]int8, C*int3XBytes), sxw: make([]float32, C*int3Words), xsum: make([]float32, 4*C)}
			quantizeInt3X(toks[i], xv[i*sh.K:(i+1)*sh.K], make([]int32, sh.K/32))
		}
		y := make([]float32, sh.T*sh.N)
		int3Tile(toks, y, m, pz, nil, 0, sh.T, 0, sh.N)
		checkIntTile(t, m, xv, wh, y, sh.T, func(tt, n int) float32 { return dotInt3IntGeneric(toks[tt], m, pz, n) })
		xv[sh.K-5] = float32(math.Inf(1))
		quantizeInt3X(toks[0], xv[:sh.K], make([]int32, sh.K/32))
		int3Tile(toks[:1], y, m, pz, nil, 0, 1, 0, sh.N)
		for n, v := range y[:sh.N] {
			if !math.IsNaN(float64(v)) {
				t.Fatalf("K=%d: x holds +Inf: y[0,%d] = %v, want NaN", sh.K, n, v)
			}
		}
	}
}

// checkIntTile checks an integer path's tile outputs y [T, m.N] for x xv
// [T, m.K]: each equal to the Go reference generic(t, n) bit for bit and
// within baseTol of the float64 reference over Ŵ (wh).
func checkIntTile(t *testing.T, m *wq.Matrix, xv, wh, y []float32, T int, generic func(tt, n int) float32) {
	t.Helper()
	N, K := m.N, m.K
	for i, v := range y[:T*N] {
		tt, n := i/N, i%N
		if g := generic(tt, n); math.Float32bits(g) != math.Float32bits(v) {
			t.Fatalf("%v K=%d: y[%d,%d] = %v, the Go reference %v", m.Elem, K, tt, n, v, g)
		}
		var want float64
		for k := range K {
			want += float64(xv[tt*K+k]) * float64(wh[n*K+k])
		}
		tol := baseTol(m, xv[tt*K:(tt+1)*K], wh, n, true) + 0x1p-24*math.Abs(want)
		if d := math.Abs(float64(v) - want); !(d <= tol) {
			t.Fatalf("%v K=%d: y[%d,%d] = %v, want %v (err %g, tol %g)", m.Elem, K, tt, n, v, want, d, tol)
		}
	}
}

// TestInt8Integer checks the integer int8 path (qint8.go): int8XPerm pairs
// each x code with the weight byte of its channel (wq's layout, on random
// codes); the VNNI tiles (1x1, 1x4 and 4x4) equal the Go reference bit for
// bit, and both the float64 reference over Ŵ within the bound of x's codes
// (baseTol), on ragged N, T = 1, 3, 4, 9 (the 4x4 tile and its remainder),
// K = 128 to 1536, codes up to 255 against x terms of either sign; and a
// token holding an Inf gives NaN in every output.
func TestInt8Integer(t *testing.T) {
	r := rand.New(rand.NewPCG(43, 44))
	// The map: the code byte that pairs with x position 8l+j (int4's order:
	// low bytes 0..3 at positions 0, 4, 1, 5; high ones at 2, 6, 3, 7) is
	// byte i of word l of the group's first (low) or second (high) chunk.
	{
		m, err := wq.NewMatrix(wq.Int8, 128, 1, 256)
		if err != nil {
			t.Fatal(err)
		}
		for k := range 256 {
			m.SetCode(0, k, uint8(r.Uint32()))
		}
		seen := map[int]bool{}
		for g := range 2 {
			for l := range dotLanes {
				for i, pos := range [8]int{0, 4, 1, 5, 2, 6, 3, 7} {
					ch := g*128 + int8XPerm[8*l+pos]
					seen[ch] = true
					word := m.Words[2*g*dotLanes+(i/4)*dotLanes+l]
					if got, want := word>>(8*(i%4))&0xff, m.Raw(0, ch); got != want {
						t.Errorf("group %d lane %d byte %d: the tile multiplies code %d by channel %d's x, whose code is %d", g, l, i, got, ch, want)
					}
				}
			}
		}
		if len(seen) != 256 {
			t.Errorf("int8XPerm covers %d of 256 channels", len(seen))
		}
	}
	if !cpufeat.VNNI() {
		t.Log("no AVX-512 VNNI here: the tiles are not checked, the Go reference is")
	}
	for _, sh := range []struct{ T, K, N int }{{1, 128, 37}, {3, 512, 66}, {4, 1536, 12}, {9, 384, 9}} {
		m, err := wq.Quantize(wq.Int8, 128, sh.N, sh.K, llmWeight(r, sh.N, sh.K))
		if err != nil {
			t.Fatal(err)
		}
		wh := dequantized(m)
		pz := packedParams(m)
		xv := activations(r, sh.T, sh.K)
		b := New(1)
		toks, release := b.quantizeIntRows(xv, sh.T, sh.K, true)
		y := make([]float32, sh.T*sh.N)
		int8Tile(toks, y, m, pz, nil, 0, sh.T, 0, sh.N)
		checkIntTile(t, m, xv, wh, y, sh.T, func(tt, n int) float32 { return dotInt8Generic(toks[tt], m, pz, n) })
		release()
		xv[sh.K-5] = float32(math.Inf(1))
		toks, release = b.quantizeIntRows(xv[:sh.K], 1, sh.K, true)
		int8Tile(toks, y, m, pz, nil, 0, 1, 0, sh.N)
		release()
		for n, v := range y[:sh.N] {
			if !math.IsNaN(float64(v)) {
				t.Fatalf("K=%d: x holds +Inf: y[0,%d] = %v, want NaN", sh.K, n, v)
			}
		}
	}
}

// TestQuantizeInt3X checks int3QuantXVBMI against the Go reference bit for
// bit at every level (codes, scales per word, X̂), on activations with
// outliers, ties, an all-zero block, a block whose scale underflows,
// subnormal and huge values, and blocks holding Inf or NaN; and the codes
// themselves: each channel's two terms rebuild a code within sx/2 of x,
// channels 30 and 31 repeated for each of the block's words.
func TestQuantizeInt3X(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	const K = 2048
	x := activations(r, 1, K)
	x[9] = 0x1p-130
	for k := 64; k < 96; k++ {
		x[k] = 0
	}
	x[100] = 0x1p-149 // block 3 (channels 96-127) holds only this...
	for k := 96; k < 128; k++ {
		if k != 100 {
			x[k] = 0
		}
	}
	x[130], x[131] = 0x1p-128, -0x1p-127
	x[170] = 3e38
	x[700] = float32(math.Inf(-1))
	x[990] = float32(math.NaN())
	x[1055] = float32(math.Inf(1))
	for k := 1536; k < K; k++ { // ties of x/sx and of c/254
		x[k] = float32(r.IntN(2*int4XMax+1)-int4XMax) * (1.5 / int4XMax)
		if k%32 == 5 {
			x[k] = -1.5
		}
	}
	C := K / int3Chunk
	newTok := func() int3Token {
		tok := int3Token{xq: make([]int8, C*int3XBytes), sxw: make([]float32, C*int3Words), xsum: make([]float32, 4*C)}
		for i := range tok.xq {
			tok.xq[i] = int8(r.Uint32())
		}
		return tok
	}
	want := newTok()
	quantizeInt3XGeneric(want, x)
	same := func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) || a != a && b != b }
	for _, lvl := range cpufeat.Levels() {
		_, restore := cpufeat.Force(lvl)
		tok := newTok()
		quantizeInt3X(tok, x, make([]int32, K/32))
		restore()
		for i := range tok.xq {
			if tok.xq[i] != want.xq[i] {
				t.Fatalf("%v: code byte %d = %d, want %d (Go)", lvl, i, tok.xq[i], want.xq[i])
			}
		}
		for i := range tok.sxw {
			if !same(tok.sxw[i], want.sxw[i]) {
				t.Fatalf("%v: sx of word %d = %v, want %v (Go)", lvl, i, tok.sxw[i], want.sxw[i])
			}
		}
		for i := range tok.xsum {
			if !same(tok.xsum[i], want.xsum[i]) {
				t.Fatalf("%v: X̂[%d] = %v, want %v (Go)", lvl, i, tok.xsum[i], want.xsum[i])
			}
		}
	}
	for ch := range C {
		for b := range 16 {
			sx := float64(want.sxw[ch*int3Words+3*b])
			if sx != sx {
				continue
			}
			for j := range 3 {
				v := 3*b + j
				for p := range 3 {
					for e := range 4 {
						at := ch*int3XBytes + 384*(v/16) + 64*p + 4*(v%16) + e
						c := int4XRatio*float64(want.xq[at]) + float64(want.xq[at+192])
						k := ch*int3Chunk + 32*b + int3PassChan(j, p, e)
						if d := math.Abs(c*sx - float64(x[k])); !(d <= sx/2*(1+0x1p-20)) && !(sx == 0 && c == 0) {
							t.Fatalf("channel %d (word %d, pass %d, byte %d): x = %v, code %v at sx %v", k, v, p, e, x[k], c, sx)
						}
					}
				}
			}
		}
	}
}
