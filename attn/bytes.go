package attn

import (
	"encoding/binary"
	"unsafe"

	"github.com/bitdecode/bitdecode/internal/half"
)

// littleEndian reports whether this machine stores a uint16's low byte
// first, as the packed layouts do; then fp16 rows are read in place.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// bytesU16 returns the little-endian uint16 values of b (len(b) even): b
// itself on a little-endian machine, a decoded copy otherwise.
func bytesU16(b []byte) []uint16 {
	if len(b) == 0 {
		return nil
	}
	if littleEndian {
		return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(b)/2)
	}
	u := make([]uint16, len(b)/2)
	for i := range u {
		u[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	return u
}

// fp8Tables[0] and [1] map every fp8 e4m3 / e5m2 byte to its float32 value.
var fp8Tables = func() (t [2][256]float32) {
	for b := range 256 {
		t[0][b] = half.E4M3.ToFloat32(uint8(b))
		t[1][b] = half.E5M2.ToFloat32(uint8(b))
	}
	return
}()

// u16Bytes returns the memory of u as bytes (2·len(u), in the machine's
// order): for copies that move whole values.
func u16Bytes(u []uint16) []byte {
	if len(u) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&u[0])), 2*len(u))
}
