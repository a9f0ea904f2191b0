package cuda

import (
	"bytes"
	"encoding/binary"
	"math"
	"strings"
	"testing"
	"unsafe"
)

// paramBytes reads the n bytes argument i of a packed kernelParams table
// points at.
func paramBytes(table unsafe.Pointer, i, n int) []byte {
	ptrs := unsafe.Slice((*unsafe.Pointer)(table), i+1)
	return unsafe.Slice((*byte)(ptrs[i]), n)
}

func TestPackArgs(t *testing.T) {
	var a argPacker
	defer a.release()
	le := binary.LittleEndian
	type affine struct {
		Scale, Shift float32
		N            int32
	}
	st := affine{1.5, -2, 7}
	stBytes := unsafe.Slice((*byte)(unsafe.Pointer(&st)), unsafe.Sizeof(st))

	args := []any{
		DevicePtr(0x7f00_0000_1000), int32(-3), uint32(0xdeadbeef), float32(0.25),
		int64(-1 << 40), uint64(1 << 63), float64(math.Pi), uint16(0x3c00), int8(-2), stBytes, uintptr(42),
	}
	want := [][]byte{
		le.AppendUint64(nil, 0x7f00_0000_1000),
		le.AppendUint32(nil, uint32(0xfffffffd)),
		le.AppendUint32(nil, 0xdeadbeef),
		le.AppendUint32(nil, math.Float32bits(0.25)),
		le.AppendUint64(nil, uint64(0xffffff0000000000)),
		le.AppendUint64(nil, 1<<63),
		le.AppendUint64(nil, math.Float64bits(math.Pi)),
		le.AppendUint16(nil, 0x3c00),
		{0xfe},
		append([]byte(nil), stBytes...),
		le.AppendUint64(nil, 42),
	}
	for round := 0; round < 2; round++ { // the second round reuses the buffers
		table, err := a.pack(args)
		if err != nil {
			t.Fatal(err)
		}
		for i, w := range want {
			got := paramBytes(table, i, len(w))
			if !bytes.Equal(got, w) {
				t.Errorf("round %d arg %d (%T): bytes %x, want %x", round, i, args[i], got, w)
			}
			if uintptr(unsafe.Pointer(&got[0]))%argWordBytes != 0 {
				t.Errorf("arg %d not 8-byte aligned", i)
			}
		}
	}
	if table, err := a.pack(nil); table != nil || err != nil {
		t.Errorf("pack(nil) = %v, %v; want nil, nil", table, err)
	}
}

func TestPackArgsGrows(t *testing.T) {
	var a argPacker
	defer a.release()
	big := make([]byte, 6000) // beyond the initial 4 KiB of words
	for i := range big {
		big[i] = byte(i)
	}
	args := []any{int32(1)}
	for i := 0; i < 100; i++ { // beyond the initial 64 pointers
		args = append(args, uint32(i))
	}
	args = append(args, big)
	table, err := a.pack(args)
	if err != nil {
		t.Fatal(err)
	}
	if got := paramBytes(table, 101, len(big)); !bytes.Equal(got, big) {
		t.Error("large struct argument corrupted")
	}
	if got := binary.LittleEndian.Uint32(paramBytes(table, 100, 4)); got != 99 {
		t.Errorf("arg 100 = %d, want 99", got)
	}
}

func TestPackArgsRejects(t *testing.T) {
	tests := []struct {
		arg  any
		want string
	}{
		{int(5), "pass int32 or int64"},
		{uint(5), "pass int32 or int64"},
		{"str", "unsupported type string"},
		{[]float32{1}, "unsupported type []float32"},
		{[]byte{}, "empty []byte"},
		{true, "unsupported type bool"},
	}
	var a argPacker
	defer a.release()
	for _, tt := range tests {
		_, err := a.pack([]any{int32(0), tt.arg})
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "argument 1") {
			t.Errorf("pack(%T) error = %v, want one mentioning argument 1 and %q", tt.arg, err, tt.want)
		}
	}
}

func TestDim3(t *testing.T) {
	x, y, z, err := Dim3{X: 128}.norm()
	if err != nil || x != 128 || y != 1 || z != 1 {
		t.Errorf("Dim3{X:128} = %d,%d,%d,%v", x, y, z, err)
	}
	if _, _, _, err := (Dim3{X: -1}).norm(); err == nil {
		t.Error("negative dimension accepted")
	}
}

func TestBytesView(t *testing.T) {
	f := []float32{1, 2}
	b := Bytes(f)
	if len(b) != 8 || binary.LittleEndian.Uint32(b[4:]) != math.Float32bits(2) {
		t.Errorf("Bytes(float32s) = %x", b)
	}
	if Bytes([]uint16(nil)) != nil {
		t.Error("Bytes(nil) != nil")
	}
}
