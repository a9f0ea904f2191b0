package attn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/bitdecode/bitdecode/kv"
)

// TestDecodeWindowMatchesReference runs every format on every shape class
// under a sliding window, at every SIMD level against the float64
// reference: windows smaller than a block, not a multiple of the block,
// of exactly one block, and longer than every sequence, over ragged
// lengths, with 1 and 3 query tokens and a prefill chunk of prefillRows
// query tokens (each row its own window). -short runs a subset of the
// formats, one window per shape and fewer prefill chunks.
const prefillRows = 37

// windowStride thins TestDecodeWindowMatchesReference's (spec, shape)
// pairs: pair (p, s) runs where (p + s) % windowStride == 0.
const windowStride = 4

func TestDecodeWindowMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	// The window is applied in the softmax, the same for every format:
	// every spec meets a third of the shapes in turn, every shape several
	// specs (windowStride), not the whole product that
	// TestDecodeMatchesReference covers without a window (it cost 200 s
	// here, over CI's budget).
	specs, stride := testSpecs, windowStride
	if testing.Short() {
		specs, stride = shortSpecs, windowStride-1
	}
	if raceEnabled {
		specs, stride = shortSpecs, len(testShapes)
	}
	for pi, spec := range specs {
		for si, sh := range testShapes {
			if (pi+si)%stride != 0 {
				continue
			}
			f, ok := resolveOrSkip(t, spec, sh.D)
			if !ok {
				continue
			}
			nr := f.Residual
			all := []int{nr + 7, 2*nr - 1, 3 * nr, 3*nr + 1, 4*nr - 1, 5*nr + 3}
			lens := []int{all[si%len(all)], all[(si+2)%len(all)], all[(si+4)%len(all)]}
			caches, _, _ := buildBatch(t, r, f, sh, lens)
			// One window a pair, turning with the shape and the spec so
			// that each spec meets most windows; on the shapes of groups of
			// 1 and 2 also a prefill chunk of 37 rows (under -short, those
			// of D <= 96: the tolerances' bounds cost rows times tokens per
			// kernel set).
			windows := []int{5, nr + 3, nr, 2*nr - 1, 100 * nr}
			w := windows[(si+pi)%len(windows)]
			tqs := []int{1, 3}
			if sh.Group() <= 2 && (!testing.Short() || sh.D <= 96) {
				tqs = append(tqs, prefillRows)
			}
			for _, tq := range tqs {
				p := Params{Format: f, Shape: sh, Tq: tq, Window: w}
				q := randQ(r, len(lens)*tq*sh.Hq*sh.D)
				checkDecode(t, fmt.Sprintf("%s Hq=%d Hkv=%d D=%d lens=%v Tq=%d W=%d", spec, sh.Hq, sh.Hkv, sh.D, lens, tq, w), seqsOf(caches), p, q)
			}
		}
	}
}

// TestDecodeWindowLong covers windows over sequences of several splits:
// the blocks before the window are skipped and the rest split from the
// window's first block, the merge runs, and the bits are the same
// whatever GOMAXPROCS; a window longer than the sequence gives the bits of
// no window.
func TestDecodeWindowLong(t *testing.T) {
	r := rand.New(rand.NewPCG(43, 44))
	sh := Shape{Hq: 8, Hkv: 2, D: 128}
	specs := []string{"int4", "fp16", "int2:kc32:v32", "k4v2"}
	if testing.Short() {
		specs = specs[:2]
	}
	if raceEnabled {
		specs = specs[:1]
	}
	for _, spec := range specs {
		f := kv.MustResolve(spec, sh.D)
		lens := []int{3*SplitTokens + 77, SplitTokens + f.Residual, 5}
		caches, _, _ := buildBatch(t, r, f, sh, lens)
		windows := []int{SplitTokens + 100, 4095, 7}
		if raceEnabled {
			windows = windows[:1]
		}
		for _, w := range windows {
			p := Params{Format: f, Shape: sh, Tq: 2, Window: w}
			q := randQ(r, len(lens)*p.Tq*sh.Hq*sh.D)
			name := fmt.Sprintf("%s W=%d long", spec, w)
			checkDecode(t, name, seqsOf(caches), p, q)
			var ref []float32
			for _, procs := range []int{1, 2} {
				prev := runtime.GOMAXPROCS(procs)
				out := nanSlice(len(q))
				err := Decode(out, q, seqsOf(caches), p)
				runtime.GOMAXPROCS(prev)
				if err != nil {
					t.Fatal(err)
				}
				if ref == nil {
					ref = out
				}
				for i := range out {
					if math.Float32bits(out[i]) != math.Float32bits(ref[i]) {
						t.Fatalf("%s GOMAXPROCS %d: element %d: %g, %g at 1", name, procs, i, out[i], ref[i])
					}
				}
			}
		}
		p := Params{Format: f, Shape: sh, Tq: 2}
		q := randQ(r, len(lens)*p.Tq*sh.Hq*sh.D)
		full, wide := nanSlice(len(q)), nanSlice(len(q))
		pw := p
		pw.Window = 4*SplitTokens + 1
		if err := Decode(full, q, seqsOf(caches), p); err != nil {
			t.Fatal(err)
		}
		if err := Decode(wide, q, seqsOf(caches), pw); err != nil {
			t.Fatal(err)
		}
		for i := range full {
			if math.Float32bits(full[i]) != math.Float32bits(wide[i]) {
				t.Fatalf("%s: element %d: %g with a window past the sequence, %g without", spec, i, wide[i], full[i])
			}
		}
	}
}

// TestWindowOne: with a window of one token each query token sees only
// itself, so its output is its own V row (fp16-rounded): an off-by-one in
// the window's start would mix in the token before.
func TestWindowOne(t *testing.T) {
	r := rand.New(rand.NewPCG(45, 46))
	sh := Shape{Hq: 4, Hkv: 2, D: 64}
	f := kv.MustResolve("fp16", sh.D)
	const L, tq = 300, 4
	caches, _, vals := buildBatch(t, r, f, sh, []int{L})
	p := Params{Format: f, Shape: sh, Tq: tq, Window: 1}
	q := randQ(r, tq*sh.Hq*sh.D)
	got := nanSlice(len(q))
	if err := Decode(got, q, seqsOf(caches), p); err != nil {
		t.Fatal(err)
	}
	for i := range tq {
		for hq := range sh.Hq {
			h := hq / sh.Group()
			for c := range sh.D {
				g := got[(i*sh.Hq+hq)*sh.D+c]
				want := vals[0][((L-tq+i)*sh.Hkv+h)*sh.D+c]
				if math.Abs(float64(g-want)) > 1e-3 {
					t.Fatalf("query %d head %d channel %d: got %g, want V[%d] = %g", i, hq, c, g, L-tq+i, want)
				}
			}
		}
	}
	if err := Decode(got, q, seqsOf(caches), Params{Format: f, Shape: sh, Tq: tq, Window: -1}); err == nil {
		t.Fatal("a negative window was accepted")
	}
}
