package safetensors

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/bitdecode/bitdecode/internal/half"
)

// TestDecodeFloat32Spans checks DecodeFloat32's spans on several goroutines
// against the one-element conversions, for each dtype, a length that
// leaves a partial span, and a bad length.
func TestDecodeFloat32Spans(t *testing.T) {
	n := 3*decodeSpan + 17
	data := make([]byte, 4*n)
	for i := range data {
		data[i] = byte(i*31 + i>>7)
	}
	for _, dt := range []DType{F32, F16, BF16} {
		sz := dt.Size()
		got := make([]float32, n)
		if err := DecodeFloat32(got, data[:sz*n], dt); err != nil {
			t.Fatalf("%v: %v", dt, err)
		}
		for i, v := range got {
			var want float32
			switch dt {
			case F32:
				want = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
			case F16:
				want = half.ToFloat32(binary.LittleEndian.Uint16(data[2*i:]))
			case BF16:
				want = half.BF16ToFloat32(binary.LittleEndian.Uint16(data[2*i:]))
			}
			if math.Float32bits(v) != math.Float32bits(want) {
				t.Fatalf("%v: element %d = %v, want %v", dt, i, v, want)
			}
		}
	}
	if err := DecodeFloat32(make([]float32, 4), data[:7], F16); err == nil {
		t.Error("7 bytes of F16 decoded")
	}
}
