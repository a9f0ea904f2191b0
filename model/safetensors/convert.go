package safetensors

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/bitdecode/bitdecode/internal/half"
)

// DecodeFloat32 converts src, little-endian elements of type dtype, to
// float32 in dst; len(src) must be len(dst) times the element size. F32 is
// copied, F16 and BF16 are widened exactly (subnormals, infinities and NaN
// included); other dtypes give an error wrapping ErrUnsupportedDType.
func DecodeFloat32(dst []float32, src []byte, dtype DType) error {
	switch dtype {
	case F32, F16, BF16:
	default:
		return fmt.Errorf("%w %q for float32 conversion (supported: F32, F16, BF16)", ErrUnsupportedDType, dtype)
	}
	if size := dtype.Size(); len(src) != len(dst)*size {
		return fmt.Errorf("%d bytes of %s for %d values", len(src), dtype, len(dst))
	}
	// Spans of the tensor on every core (each element alone: the same
	// values whatever the split); a large matrix took seconds on one.
	spans := (len(dst) + decodeSpan - 1) / decodeSpan
	workers := min(runtime.GOMAXPROCS(0), spans)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for sp := w; sp < spans; sp += workers {
				decodeSpanOf(dst[sp*decodeSpan:min(len(dst), (sp+1)*decodeSpan)], src[sp*decodeSpan*dtype.Size():], dtype)
			}
		})
	}
	wg.Wait()
	return nil
}

// decodeSpan is the elements of one DecodeFloat32 work item.
const decodeSpan = 1 << 16

// decodeSpanOf converts len(dst) elements of src (DecodeFloat32's checked
// dtypes).
func decodeSpanOf(dst []float32, src []byte, dtype DType) {
	switch dtype {
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	case F16:
		for i := range dst {
			dst[i] = half.ToFloat32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case BF16:
		for i := range dst {
			dst[i] = half.BF16ToFloat32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	}
}
