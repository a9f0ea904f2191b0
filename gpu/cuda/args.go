package cuda

import (
	"fmt"
	"math"
	"runtime"
	"unsafe"
)

// Sizes of the kernel-argument block.
const (
	argWordBytes    = 8   // every argument starts on an 8-byte boundary
	argInitialWords = 512 // 4 KiB, the classic kernel-parameter limit
	argInitialCount = 64  // argument pointers before the table grows
)

// argPacker builds the kernelParams table of cuLaunchKernel: an array of
// pointers, one per kernel parameter, each pointing at the parameter's value.
// Values live in words, pointers in ptrs; both are Go heap memory pinned with
// a runtime.Pinner for as long as the packer lives, and reused by every
// launch, so packing allocates nothing. A packer belongs to one owner thread.
type argPacker struct {
	words []uint64
	ptrs  []unsafe.Pointer
	pin   runtime.Pinner
}

// reserve makes room for nWords words of values and nArgs pointers,
// re-pinning if the buffers had to grow.
func (a *argPacker) reserve(nWords, nArgs int) {
	if nWords <= len(a.words) && nArgs <= len(a.ptrs) {
		return
	}
	a.pin.Unpin()
	if nWords > len(a.words) {
		a.words = make([]uint64, max(nWords, argInitialWords, 2*len(a.words)))
	}
	if nArgs > len(a.ptrs) {
		a.ptrs = make([]unsafe.Pointer, max(nArgs, argInitialCount, 2*len(a.ptrs)))
	}
	a.pin.Pin(&a.words[0])
	a.pin.Pin(&a.ptrs[0])
}

// release unpins the buffers; the packer may be used again afterwards.
func (a *argPacker) release() {
	a.pin.Unpin()
	a.words, a.ptrs = nil, nil
}

// argSize returns the byte size of one kernel argument, or an error naming
// its position and type.
func argSize(i int, v any) (int, error) {
	switch x := v.(type) {
	case DevicePtr, int64, uint64, float64, uintptr:
		return 8, nil
	case int32, uint32, float32:
		return 4, nil
	case int16, uint16:
		return 2, nil
	case int8, uint8:
		return 1, nil
	case []byte:
		if len(x) == 0 {
			return 0, fmt.Errorf("cuda: kernel argument %d is an empty []byte", i)
		}
		return len(x), nil
	case int, uint:
		return 0, fmt.Errorf("cuda: kernel argument %d has Go type %T, whose size is not C's: pass int32 or int64", i, v)
	default:
		return 0, fmt.Errorf("cuda: kernel argument %d has unsupported type %T (want DevicePtr, int32, uint32, float32, int64, uint64, float64, int16, uint16, int8, uint8 or []byte)", i, v)
	}
}

// pack writes args into the packer and returns the kernelParams table, or nil
// for no arguments. The table stays valid until the next pack.
func (a *argPacker) pack(args []any) (unsafe.Pointer, error) {
	if len(args) == 0 {
		return nil, nil
	}
	words := 0
	for i, v := range args {
		n, err := argSize(i, v)
		if err != nil {
			return nil, err
		}
		words += (n + argWordBytes - 1) / argWordBytes
	}
	a.reserve(words, len(args))
	w := 0
	for i, v := range args {
		slot := unsafe.Pointer(&a.words[w])
		a.words[w] = 0
		switch x := v.(type) {
		case DevicePtr:
			*(*uint64)(slot) = uint64(x)
		case int64:
			*(*int64)(slot) = x
		case uint64:
			*(*uint64)(slot) = x
		case float64:
			*(*uint64)(slot) = math.Float64bits(x)
		case uintptr:
			*(*uint64)(slot) = uint64(x)
		case int32:
			*(*int32)(slot) = x
		case uint32:
			*(*uint32)(slot) = x
		case float32:
			*(*uint32)(slot) = math.Float32bits(x)
		case int16:
			*(*int16)(slot) = x
		case uint16:
			*(*uint16)(slot) = x
		case int8:
			*(*int8)(slot) = x
		case uint8:
			*(*uint8)(slot) = x
		case []byte:
			n := (len(x) + argWordBytes - 1) / argWordBytes
			clear(a.words[w : w+n])
			copy(unsafe.Slice((*byte)(slot), n*argWordBytes), x)
			w += n - 1
		}
		a.ptrs[i] = slot
		w++
	}
	return unsafe.Pointer(&a.ptrs[0]), nil
}
