package tp

import (
	"bytes"
	"encoding/binary"
	"math"
	"runtime"
	"testing"
)

// TestRandomBF16: the random vocabulary part of a benchmark model is the
// same whatever the goroutines, has the asked deviation and mean 0 (within
// 5 standard errors of a uniform sample), and its padding rows are zero.
func TestRandomBF16(t *testing.T) {
	const rows, cols, pad, std = 2*randomRowsPerChunk + 37, 64, 1, 0.02
	a := randomBF16(rows, cols, pad, std, 7)
	prev := runtime.GOMAXPROCS(1)
	b := randomBF16(rows, cols, pad, std, 7)
	runtime.GOMAXPROCS(prev)
	if !bytes.Equal(a, b) {
		t.Fatal("randomBF16 depends on GOMAXPROCS")
	}
	if c := randomBF16(rows, cols, pad, std, 8); bytes.Equal(a, c) {
		t.Fatal("randomBF16 ignores its seed")
	}
	n := rows * cols
	var sum, sq float64
	for i := range n {
		v := float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(a[2*i:])) << 16))
		sum += v
		sq += v * v
	}
	mean, dev := sum/float64(n), math.Sqrt(sq/float64(n))
	// A uniform variable's square has relative deviation 2/√5 of its mean.
	if se := std / math.Sqrt(float64(n)); math.Abs(mean) > 5*se {
		t.Errorf("mean %.3g, want 0 within %.3g", mean, 5*se)
	}
	if rel := 5 * 2 / math.Sqrt(5) / math.Sqrt(float64(n)); math.Abs(dev*dev/(std*std)-1) > rel+1e-2 {
		t.Errorf("deviation %.5f, want %.5f (variance within %.3g relative, plus bf16 rounding)", dev, std, rel+1e-2)
	}
	for i, x := range a[2*n:] {
		if x != 0 {
			t.Fatalf("padding byte %d = %d, want 0", i, x)
		}
	}
}
