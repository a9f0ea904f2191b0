package gpu_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/bitdecode/bitdecode/backend/gpu"
	"github.com/bitdecode/bitdecode/internal/testmodel"
	"github.com/bitdecode/bitdecode/model"
)

// TestModelPDLSameBits runs gocoder-23m's prompt and 24 greedy decode steps
// (the steps replayed as CUDA graphs from the third on) on backends that
// differ only in programmatic dependent launch: off, on, and on with
// gemv.cu's early weight loads; and in the batch-invariant mode (linear.cu
// everywhere) off and on. Every logit of every step must have the same bits
// as with it off: PDL changes when kernels start, never what they compute.
func TestModelPDLSameBits(t *testing.T) {
	dir := testmodel.Dir(t)
	gpuBackend(t) // skips without a device
	const steps = 24
	ids := []int32{5, 100, 2000, 7, 42, 8000, 3, 77, 1234, 4321, 11, 900}
	run := func(o gpu.Options) [][]float32 {
		be, err := gpu.Open(0, o)
		if err != nil {
			t.Fatal(err)
		}
		defer be.Close()
		m, err := model.Load(dir, be, model.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		cache := model.NewDenseCache(be, m.Config())
		var out [][]float32
		var b model.Batch
		b.Add(0, 0, ids...)
		b.AllLogits = true
		lg, err := m.Forward(&b, cache)
		if err != nil {
			t.Fatal(err)
		}
		for r := range lg.Rows() {
			out = append(out, append([]float32(nil), lg.Row(r)...))
		}
		next := argmax(out[len(out)-1])
		for s := range steps {
			var d model.Batch
			d.Add(0, len(ids)+s, next)
			lg, err := m.Forward(&d, cache)
			if err != nil {
				t.Fatalf("decode step %d: %v", s, err)
			}
			row := append([]float32(nil), lg.Row(0)...)
			out = append(out, row)
			next = argmax(row)
		}
		return out
	}
	same := func(name string, got, want [][]float32) {
		if len(got) != len(want) {
			t.Fatalf("%s: %d rows of logits, want %d", name, len(got), len(want))
		}
		for r := range want {
			for j := range want[r] {
				if math.Float32bits(got[r][j]) != math.Float32bits(want[r][j]) {
					t.Fatalf("%s: row %d (%s) logit %d = %v, want %v (PDL off)", name, r, rowName(r, len(ids)), j, got[r][j], want[r][j])
				}
			}
		}
	}
	for _, inv := range []bool{false, true} {
		base := options
		base.BatchInvariant = inv
		off := base
		off.NoPDL = true
		want := run(off)
		on := base
		on.NoPDL, on.PDLEarlyWeights = false, false
		same(fmt.Sprintf("PDL on (batch-invariant %v)", inv), run(on), want)
		if !inv {
			on.PDLEarlyWeights = true
			same("PDL on, early weights", run(on), want)
		}
	}
}

// rowName names row r of TestModelPDLSameBits's logits.
func rowName(r, prompt int) string {
	if r < prompt {
		return fmt.Sprintf("prompt position %d", r)
	}
	return fmt.Sprintf("decode step %d", r-prompt)
}
