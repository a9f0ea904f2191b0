package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bitdecode/bitdecode/internal/cpufeat"
	"github.com/bitdecode/bitdecode/wq"
)

// TestQuantLinearLevels checks the packed-weight Linear (the packed order
// for int8 and int4 with groups of 128, dequantized tiles otherwise) at every
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
			for _, sh := range []struct{ K, N int }{{128, 5}, {384, 37}, {512, 66}} {
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
	var ref []float32
	for _, lvl := range cpufeat.Levels() {
		_, restore := cpufeat.Force(lvl)
		for _, threads := range []int{1, 2} {
			b := New(threads)
			w := mustQuant(t, b, m, nil)
			x := mustTensor(t, b, xv, T, K)
			y := poisoned(t, b, T, N)
			b.Linear(y, x, w, mustWeight(t, b, "bias", bv, N))
			got := download(t, b, y)
			if ref == nil {
				for i, v := range got {
					tt, n := i/N, i%N
					want := float64(bv[n])
					for k := range K {
						want += float64(xv[tt*K+k]) * float64(wh[n*K+k])
					}
					tol := canonicalTol(xv[tt*K:(tt+1)*K], wh[n*K:(n+1)*K], bv[n], K)
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
					t.Fatalf("%v, %d threads: y[%d,%d] = %v, want the bits of %v (generic, 1 thread)", lvl, threads, i/N, i%N, v, ref[i])
				}
			}
		}
		restore()
	}
}

// TestPackedPermutation checks the packed order's channel map against
// wq's layout: field f of word l of a chunk holds channel chan(f, l).
func TestPackedPermutation(t *testing.T) {
	for e, p := range packedFormats {
		const N = 1
		K := p.ch
		m, err := wq.NewMatrix(e, packedGroup, N, 2*K)
		if err != nil {
			t.Fatal(err)
		}
		// Two passes of codes (k's low and high digits in base mask+1)
		// identify every channel even with 4-bit codes.
		bits := uint(0)
		for v := p.mask; v != 0; v >>= 1 {
			bits++
		}
		for pass := range uint(2) {
			for k := range 2 * K {
				m.SetCode(0, k, uint8(uint32(k)>>(bits*pass)&p.mask))
			}
			for i, ch := range p.chans {
				f, l := i/dotLanes, i%dotLanes
				got := m.Words[l] >> p.shifts[f] & p.mask
				if want := uint32(ch) >> (bits * pass) & p.mask; got != want {
					t.Errorf("%v pass %d: field %d of word %d holds code %d, want channel %d's", e, pass, f, l, got, ch)
				}
			}
		}
		seen := map[int]bool{}
		for _, ch := range p.chans {
			seen[ch] = true
		}
		if len(seen) != K {
			t.Errorf("%v: the map covers %d of %d channels", e, len(seen), K)
		}
	}
}
