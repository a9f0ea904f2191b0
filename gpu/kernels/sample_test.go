package kernels_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
)

var (
	sampleOnce sync.Once
	sampleK    *kernels.Sample
	sampleErr  error
)

// sampleSetup opens GPU 0 and compiles sample.cu once, or skips the test.
func sampleSetup(t *testing.T) (*cuda.Device, *kernels.Sample) {
	t.Helper()
	dev, _ := opsSetup(t)
	sampleOnce.Do(func() {
		if sampleK, sampleErr = kernels.LoadSample(dev); sampleErr != nil {
			sampleErr = fmt.Errorf("compile sample.cu: %w", sampleErr)
		}
	})
	if sampleErr != nil {
		t.Fatal(sampleErr)
	}
	return dev, sampleK
}

// argmaxRef is model.Argmax (model/batch.go), the host's greedy token,
// which this package may not import: the index of the largest value, the
// first of equal ones; a NaN is never larger than anything, so a NaN at
// index 0 wins.
func argmaxRef(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

// argmaxRow fills a row of V logits of one of the kinds argmax_rows must
// get right, chosen by kind.
func argmaxRow(r *rand.Rand, V, kind int) []float32 {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	negZero := math.Float32frombits(1 << 31)
	x := make([]float32, V)
	for i := range x {
		x[i] = float32(r.NormFloat64() * 3)
	}
	at := func() int { return r.IntN(V) }
	switch kind {
	case 0: // realistic logits
	case 1: // ties: few distinct values, the maximum many times
		for i := range x {
			x[i] = float32(r.IntN(4)) - 2
		}
	case 2: // NaNs sprinkled, the first value a number
		for range 1 + V/7 {
			x[at()] = nan
		}
		x[0] = -1
	case 3: // a NaN at index 0: the answer is 0
		x[0] = nan
		x[at()] = inf
	case 4: // every value NaN
		for i := range x {
			x[i] = nan
		}
	case 5: // every value -Inf
		for i := range x {
			x[i] = -inf
		}
	case 6: // +Inf several times, among NaNs
		for range 3 {
			x[at()] = inf
			x[at()] = nan
		}
	case 7: // -0 and +0 the maximum: the first of either wins
		for i := range x {
			x[i] = -float32(math.Abs(float64(x[i]))) - 1
		}
		for range 4 {
			x[at()] = negZero
			x[at()] = 0
		}
	case 8: // the maximum at the last index, nearly at the first
		x[V-1] = 100
		x[0] = 100
		if V > 2 {
			x[0] = 99
		}
	case 9: // NaN then -Inf everywhere but one finite value
		for i := range x {
			x[i] = -inf
		}
		x[at()] = nan
		x[at()] = -3
		x[0] = -inf
	}
	return x
}

// TestArgmaxRows checks argmax_rows against model.Argmax's rule on rows of
// every awkward kind (ties, NaNs, a NaN first, all NaN, all -Inf, +Inf,
// -0/+0, the maximum last) at vocabularies that are and are not multiples
// of 4 (the float4 and scalar paths), from 16-byte aligned and unaligned
// rows, into NaN-poisoned outputs; a second launch must give the same.
func TestArgmaxRows(t *testing.T) {
	dev, k := sampleSetup(t)
	g := newGPUMem(t, dev)
	r := rand.New(rand.NewPCG(23, 29))
	const kinds = 10
	shapes := [][2]int{{1, 1}, {3, 2}, {10, 3}, {10, 5}, {20, 31}, {10, 33}, {12, 1000}, {10, 1001}, {4, 4097}, {3, 40963}, {2, 128256}, {55, 4100}}
	if !testing.Short() {
		shapes = append(shapes, [2]int{55, 128256}, [2]int{20, 151936}, [2]int{7, 128257})
	}
	for _, sh := range shapes {
		R, V := sh[0], sh[1]
		for _, offset := range []int{0, 1} { // floats before the first row: 1 breaks float4 alignment
			rows := make([][]float32, R)
			host := make([]float32, offset, offset+R*V)
			for i := range rows {
				rows[i] = argmaxRow(r, V, (i+offset)%kinds)
				host = append(host, rows[i]...)
			}
			buf := g.put(cuda.Bytes(host))
			src := buf + cuda.DevicePtr(4*offset)
			poison := make([]int32, R)
			for i := range poison {
				poison[i] = -7
			}
			dst := g.put(cuda.Bytes(poison))
			var first []int32
			for run := range 2 {
				g.run(func(c *cuda.Ctx, s cuda.Stream) error { return k.ArgmaxRows(c, s, dst, src, R, V) })
				got := make([]int32, R)
				g.read(cuda.Bytes(got), dst)
				for i, row := range rows {
					if want := argmaxRef(row); int(got[i]) != want {
						t.Fatalf("[%d, %d] offset %d run %d: row %d (kind %d) argmax %d, want %d (value %g there, %g at want)",
							R, V, offset, run, i, (i+offset)%kinds, got[i], want, valueAt(row, int(got[i])), row[want])
					}
				}
				if run == 0 {
					first = got
					g.write(dst, cuda.Bytes(poison))
				} else {
					for i := range got {
						if got[i] != first[i] {
							t.Fatalf("[%d, %d]: row %d gave %d, then %d", R, V, i, first[i], got[i])
						}
					}
				}
			}
		}
	}
}

// valueAt returns x[i], or NaN for an index outside x (a broken result).
func valueAt(x []float32, i int) float32 {
	if i < 0 || i >= len(x) {
		return float32(math.NaN())
	}
	return x[i]
}

// TestArgmaxRowsBadShape checks that a bad shape is an error, not a launch.
func TestArgmaxRowsBadShape(t *testing.T) {
	dev, k := sampleSetup(t)
	for _, sh := range [][2]int{{0, 5}, {5, 0}, {-1, 3}} {
		err := dev.Do(func(c *cuda.Ctx) error { return k.ArgmaxRows(c, dev.Stream(), 16, 16, sh[0], sh[1]) })
		if err == nil {
			t.Errorf("ArgmaxRows of [%d, %d]: no error", sh[0], sh[1])
		}
	}
}
