package attn

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/bitdecode/bitdecode/kv"
)

// TestPadRows: every level's padRows gives padRowsGo's bytes (each row
// copied, then zeros to the padded row; bytes past n rows untouched), for
// rows within one 64-byte chunk and across several.
func TestPadRows(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 24))
	sizes := [][2]int{{48, 64}, {24, 32}, {40, 64}, {20, 32}, {96, 128}, {80, 128}, {4, 4}, {384, 512}, {192, 256}, {64, 64}, {1, 63}, {65, 130}, {0, 16}, {240, 256}}
	for _, k := range append(levelSets(), &genericVNNIKernels) {
		if k.padRows == nil {
			continue
		}
		for _, sz := range sizes {
			for _, n := range []int{0, 1, 3, 128} {
				src := randBytes(r, n*sz[0]+7)
				want := randBytes(r, n*sz[1]+64)
				got := append([]byte(nil), want...)
				padRowsGo(want, src, n, sz[0], sz[1])
				k.padRows(got, src, n, sz[0], sz[1])
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("%v padRows %d rows of %d to %d bytes: byte %d = %#x, want %#x", k, n, sz[0], sz[1], i, got[i], want[i])
					}
				}
				for i := range n {
					for _, b := range want[i*sz[1]+sz[0] : (i+1)*sz[1]] {
						if b != 0 {
							t.Fatalf("padRowsGo %d to %d bytes: row %d not padded with zeros", sz[0], sz[1], i)
						}
					}
				}
			}
		}
	}
}

// TestPadParams: the integer formats at a head dim that is not a multiple
// of 64 run at the padded width (128 where a half is int4, else the next
// multiple of 64) with the real head dim's softmax scale; multiples of 64,
// float halves and kernel sets without padRows do not.
func TestPadParams(t *testing.T) {
	cases := []struct {
		spec   string
		d, dp  int
		padded bool
	}{
		{"int4", 96, 128, true}, {"int4", 80, 128, true}, {"int4", 160, 256, true}, {"int2", 96, 128, true},
		{"int2", 160, 192, true}, {"int8", 112, 128, true}, {"k4v2", 96, 128, true}, {"k8v4", 80, 128, true},
		{"int4:kt128", 96, 128, true}, {"int4:kt32:v32", 96, 128, true}, {"int2:kc32:v32", 96, 128, true},
		{"int4:kt32:v32", 80, 80, false}, // V groups of 32 do not divide 80: refused by Resolve (no case)
		{"int4", 128, 128, false}, {"int4", 64, 64, false}, {"int2", 192, 192, false}, {"fp16", 96, 96, false},
		{"k4v16", 96, 96, false}, {"k16v2:v64", 96, 96, false},
	}
	for _, c := range cases {
		f, err := kv.MustParseSpec(c.spec).Resolve(c.d)
		if err != nil {
			continue
		}
		p := Params{Format: f, Shape: Shape{Hq: 8, Hkv: 2, D: c.d}, Tq: 1}
		for _, k := range []*kernels{&genericVNNIKernels, &genericU8Kernels} {
			wp, ok := padParams(p, k)
			if ok != c.padded || wp.Shape.D != c.dp || wp.Format.D != c.dp {
				t.Fatalf("%s D=%d: padded %v at %d (format %d), want %v at %d", c.spec, c.d, ok, wp.Shape.D, wp.Format.D, c.padded, c.dp)
			}
			if wp.scale() != p.scale() {
				t.Fatalf("%s D=%d: scale %g at the padded width, want %g", c.spec, c.d, wp.scale(), p.scale())
			}
			// One query row (MHA, Tq 1) pads unless a half is 8-bit;
			// three rows (Tq 3) as GQA.
			for _, tq := range []int{1, 3} {
				mha := Params{Format: f, Shape: Shape{Hq: 2, Hkv: 2, D: c.d}, Tq: tq}
				want := c.padded && (tq > 1 || f.K.Elem != kv.Int8 && f.V.Elem != kv.Int8)
				if _, ok := padParams(mha, k); ok != want {
					t.Fatalf("%s D=%d MHA Tq %d: padded %v, want %v", c.spec, c.d, tq, ok, want)
				}
			}
		}
		if _, ok := padParams(p, &genericKernels); ok {
			t.Fatalf("%s D=%d padded by a set without padRows", c.spec, c.d)
		}
	}
}

// TestPaddedDecode runs the decode at head dims that are not multiples of
// 64 with the padded width (the kernel set as is) and without it (padRows
// nil: the paths of the real head dim), every GQA group the checkpoints
// have, each against the float64 reference (checkDecode's bounds for the
// set) and against each other within the sum of both bounds.
func TestPaddedDecode(t *testing.T) {
	r := rand.New(rand.NewPCG(96, 80))
	shapes := []Shape{{Hq: 2, Hkv: 2, D: 96}, {Hq: 4, Hkv: 2, D: 96}, {Hq: 6, Hkv: 2, D: 96}, {Hq: 8, Hkv: 1, D: 80},
		{Hq: 14, Hkv: 2, D: 112}, {Hq: 8, Hkv: 1, D: 160}}
	specs := []string{"int4", "int2", "int8", "k4v2", "int4:kt128", "int2:kc32:v32"}
	if testing.Short() || raceEnabled {
		shapes, specs = shapes[1:3], specs[:3]
	}
	var sets []*kernels
	for _, k := range append(levelSets(), &genericU8Kernels) {
		if k.padRows != nil {
			sets = append(sets, k)
		}
	}
	if raceEnabled && len(sets) > 1 { // the workers' sharing, not every kernel set
		sets = sets[:1]
	}
	for _, sh := range shapes {
		for _, spec := range specs {
			f, ok := resolveOrSkip(t, spec, sh.D)
			if !ok {
				continue
			}
			caches, _, _ := buildBatch(t, r, f, sh, []int{5, 600, 1030})
			seqs := seqsOf(caches)
			for _, c := range [][2]int{{1, 0}, {3, 0}, {1, 300}} { // Tq, window
				p := Params{Format: f, Shape: sh, Tq: c[0], Window: c[1]}
				q := randQ(r, len(seqs)*c[0]*sh.Hq*sh.D)
				want := nanSlice(len(q))
				st, err := Reference(want, q, seqs, p)
				if err != nil {
					t.Fatal(err)
				}
				// The bounds depend on a set only through these features:
				// computed once a case for each kind.
				qtols, vtols := map[bool][]float64{}, map[[3]bool][]float64{}
				tols := func(set *kernels) ([]float64, []float64) {
					vk := [3]bool{set.pvS16 != nil, set.pvU8 != nil, set.softmaxU8 != nil}
					if qtols[set.vnni] == nil {
						qtols[set.vnni] = queryQuantTol(set, p, seqs, q)
					}
					if vtols[vk] == nil {
						vtols[vk] = valueQuantTol(set, p, seqs, st)
					}
					return qtols[set.vnni], vtols[vk]
				}
				for i, k := range sets {
					if _, ok := padParams(Params{Format: f, Shape: sh, Tq: 3}, k); !ok {
						t.Fatalf("%v %s %v: not padded", k, spec, sh)
					}
					run := []*kernels{k}
					if i == 0 { // the unpadded path of the first set too (the others' share its Go code)
						without := *k
						without.padRows = nil
						run = append(run, &without)
					}
					name := fmt.Sprintf("%v %s %v Tq %d window %d", k, spec, sh, c[0], c[1])
					for _, set := range run {
						got := nanSlice(len(q))
						withKernels(set, func() { err = Decode(got, q, seqs, p) })
						if err != nil {
							t.Fatal(err)
						}
						qt, vt := tols(set)
						compareDecode(t, name, p, q, got, want, st, qt, vt)
					}
				}
			}
		}
	}
}

// TestPaddedScores: at the padded width the pure-Go int8-query set gives
// every block's scores with the bits of the real head dim's (the padded
// channels add integer zeros to the dot products, +0 to the folds' lane
// sums and nothing to the steps), for per-channel and per-token keys; a
// padded query channel left non-zero fails it (per-token keys' Σq).
func TestPaddedScores(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 96))
	k := &genericVNNIKernels
	for _, sh := range []Shape{{Hq: 8, Hkv: 2, D: 96}, {Hq: 3, Hkv: 1, D: 80}} {
		for _, spec := range []string{"int4", "int4:kt128", "int2", "int8", "k4v2", "int2:kc32:v32", "int8:kt128"} {
			f, ok := resolveOrSkip(t, spec, sh.D)
			if !ok {
				continue
			}
			p := Params{Format: f, Shape: sh, Tq: 1}
			wp, ok := padParams(p, k)
			if !ok {
				t.Fatalf("%s %v: not padded", spec, sh)
			}
			caches, _, _ := buildBatch(t, r, f, sh, []int{3 * f.Residual})
			s := &caches[0].Seq
			q := randQ(r, sh.Hq*sh.D)
			plain := newWorker(p, k)
			padded := getWorker(p, wp, k)
			for h := 0; h < sh.Hkv; h++ {
				plain.loadQueries(q, 0, h)
				padded.loadQueries(q, 0, h)
				plain.qReady, padded.qReady = false, false
				for blk := range s.Blocks {
					base := s.Blocks[blk][h*f.BlockBytes():]
					plain.blockScores(base[:f.K.Bytes], f.Residual)
					padded.blockScores(padded.padK(base, blk%2), f.Residual)
					for row := 0; row < plain.r; row++ {
						got := padded.scores[row*padded.npad : row*padded.npad+f.Residual]
						want := plain.scores[row*plain.npad : row*plain.npad+f.Residual]
						sameBits(t, fmt.Sprintf("%s %v head %d block %d row %d: padded scores", spec, sh, h, blk, row), got, want)
					}
				}
			}
		}
	}
}

// TestValueParamsGroups: valueParams gives every value group's scales and
// zeros (vs, zs: group-major, npad apart) the fp16 values as stored, with
// two and four groups (deinterleave, round 24) and eight (the loop), at
// every level.
func TestValueParamsGroups(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 4))
	for _, k := range allKernelSets() {
		for _, c := range []struct {
			spec string
			d    int
		}{{"int4", 256}, {"int4:kc64:v64", 128}, {"int4:kc32:v32", 128}, {"int2:kc32:v32", 256}, {"int8:v64", 256}} {
			f := kv.MustParseSpec(c.spec)
			fm, err := f.Resolve(c.d)
			if err != nil {
				t.Fatal(err)
			}
			w := newWorker(Params{Format: fm, Shape: Shape{Hq: 4, Hkv: 1, D: c.d}, Tq: 1}, k)
			lay := &fm.V
			groups := c.d / lay.Group
			v := randBytes(r, lay.Bytes)
			for i := lay.ParamsOffset; i < lay.Bytes; i += 2 { // finite fp16 (no NaN: bit patterns compared anyway)
				v[i+1] &= 0x7b
			}
			n := fm.Residual
			w.valueParams(v, n, groups)
			for tk := 0; tk < n; tk++ {
				for j := 0; j < groups; j++ {
					sc, zc := lay.Param(v, lay.ParamIndex(tk, j*lay.Group))
					if w.vs[j*w.npad+tk] != fp16ToF32[sc] || w.zs[j*w.npad+tk] != fp16ToF32[zc] {
						t.Fatalf("%v %s D=%d: token %d group %d: (%g, %g), want (%g, %g)", k, c.spec, c.d, tk, j,
							w.vs[j*w.npad+tk], w.zs[j*w.npad+tk], fp16ToF32[sc], fp16ToF32[zc])
					}
				}
			}
		}
	}
}
