package cuda

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Alloc allocates bytes of device memory (cuMemAlloc_v2, 256-byte aligned).
func (c *Ctx) Alloc(bytes int) (DevicePtr, error) {
	if bytes <= 0 {
		return 0, fmt.Errorf("cuda: Alloc of %d bytes", bytes)
	}
	drv := c.d.drv
	var p uint64
	r, _, _ := purego.SyscallN(drv.cuMemAlloc, uintptr(unsafe.Pointer(&p)), uintptr(bytes))
	if err := drv.check("cuMemAlloc_v2", int32(r)); err != nil {
		return 0, fmt.Errorf("alloc %d bytes: %w", bytes, err)
	}
	return DevicePtr(p), nil
}

// Free frees device memory from Alloc. Freeing 0 does nothing.
func (c *Ctx) Free(p DevicePtr) error {
	if p == 0 {
		return nil
	}
	drv := c.d.drv
	return drv.check("cuMemFree_v2", drv.call(drv.cuMemFree, uintptr(p)))
}

// HtoD copies src to device memory at dst and returns when the copy is done.
//
// cuMemcpyHtoD from pageable memory returns once src is staged, not when the
// DMA into dst has finished, and it runs on the legacy default stream, which
// our non-blocking streams do not wait for: a kernel launched right after
// could read dst before the copy lands. So HtoD waits for the legacy stream.
func (c *Ctx) HtoD(dst DevicePtr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	drv := c.d.drv
	r, _, _ := purego.SyscallN(drv.cuMemcpyHtoD, uintptr(dst), uintptr(unsafe.Pointer(&src[0])), uintptr(len(src)))
	if err := drv.check("cuMemcpyHtoD_v2", int32(r)); err != nil {
		return err
	}
	return c.syncLegacy()
}

// syncLegacy waits for the legacy default stream, where the synchronous
// copies (HtoD, DtoD) run.
func (c *Ctx) syncLegacy() error {
	drv := c.d.drv
	return drv.check("cuStreamSynchronize", drv.call(drv.cuStreamSynchronize, 0))
}

// DtoH copies len(dst) bytes from device memory at src into dst.
func (c *Ctx) DtoH(dst []byte, src DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	drv := c.d.drv
	r, _, _ := purego.SyscallN(drv.cuMemcpyDtoH, uintptr(unsafe.Pointer(&dst[0])), uintptr(src), uintptr(len(dst)))
	return drv.check("cuMemcpyDtoH_v2", int32(r))
}

// DtoD copies bytes from src to dst on the device and returns when the copy
// is done (cuMemcpyDtoD is asynchronous to the host, on the legacy stream:
// see HtoD).
func (c *Ctx) DtoD(dst, src DevicePtr, bytes int) error {
	if bytes == 0 {
		return nil
	}
	drv := c.d.drv
	if err := drv.check("cuMemcpyDtoD_v2", drv.call(drv.cuMemcpyDtoD, uintptr(dst), uintptr(src), uintptr(bytes))); err != nil {
		return err
	}
	return c.syncLegacy()
}

// HtoDAsync queues a copy of src to dst on s. From Go memory (pageable) the
// driver stages src before returning, so src may be reused at once; from
// pinned memory ([HostBuffer]) src must stay unchanged until s reaches the
// copy.
func (c *Ctx) HtoDAsync(dst DevicePtr, src []byte, s Stream) error {
	if len(src) == 0 {
		return nil
	}
	drv := c.d.drv
	r, _, _ := purego.SyscallN(drv.cuMemcpyHtoDAsync, uintptr(dst), uintptr(unsafe.Pointer(&src[0])), uintptr(len(src)), uintptr(s))
	return drv.check("cuMemcpyHtoDAsync_v2", int32(r))
}

// DtoHAsync queues a copy from src into dst on s. Into Go memory (pageable)
// the driver returns only when the copy is done; into pinned memory
// ([HostBuffer]) dst is valid once s has been synchronized.
func (c *Ctx) DtoHAsync(dst []byte, src DevicePtr, s Stream) error {
	if len(dst) == 0 {
		return nil
	}
	drv := c.d.drv
	r, _, _ := purego.SyscallN(drv.cuMemcpyDtoHAsync, uintptr(unsafe.Pointer(&dst[0])), uintptr(src), uintptr(len(dst)), uintptr(s))
	return drv.check("cuMemcpyDtoHAsync_v2", int32(r))
}

// DtoDAsync queues a device-to-device copy on s.
func (c *Ctx) DtoDAsync(dst, src DevicePtr, bytes int, s Stream) error {
	if bytes == 0 {
		return nil
	}
	drv := c.d.drv
	return drv.check("cuMemcpyDtoDAsync_v2", drv.call(drv.cuMemcpyDtoDAsync, uintptr(dst), uintptr(src), uintptr(bytes), uintptr(s)))
}

// Memset8 sets n bytes at p to v.
func (c *Ctx) Memset8(p DevicePtr, v uint8, n int) error {
	drv := c.d.drv
	return drv.check("cuMemsetD8_v2", drv.call(drv.cuMemsetD8, uintptr(p), uintptr(v), uintptr(n)))
}

// Memset32 sets n 32-bit words at p (4-byte aligned) to v.
func (c *Ctx) Memset32(p DevicePtr, v uint32, n int) error {
	drv := c.d.drv
	return drv.check("cuMemsetD32_v2", drv.call(drv.cuMemsetD32, uintptr(p), uintptr(v), uintptr(n)))
}

// Memset8Async queues setting n bytes at p to v on s.
func (c *Ctx) Memset8Async(p DevicePtr, v uint8, n int, s Stream) error {
	drv := c.d.drv
	return drv.check("cuMemsetD8Async", drv.call(drv.cuMemsetD8Async, uintptr(p), uintptr(v), uintptr(n), uintptr(s)))
}

// Memset32Async queues setting n 32-bit words at p to v on s.
func (c *Ctx) Memset32Async(p DevicePtr, v uint32, n int, s Stream) error {
	drv := c.d.drv
	return drv.check("cuMemsetD32Async", drv.call(drv.cuMemsetD32Async, uintptr(p), uintptr(v), uintptr(n), uintptr(s)))
}

// HostBuffer is page-locked host memory. A mapped buffer is also visible to
// kernels at [HostBuffer.DevicePtr] (zero-copy reads over PCIe/NVLink-C2C).
// Free it with [Ctx.FreeHost]; its bytes are invalid afterwards.
type HostBuffer struct {
	ptr    unsafe.Pointer // C memory from the driver, never Go heap
	size   int
	devPtr DevicePtr // 0 unless mapped
}

// Bytes returns the buffer's memory as a byte slice.
func (h *HostBuffer) Bytes() []byte {
	if h == nil || h.ptr == nil {
		return nil
	}
	return unsafe.Slice((*byte)(h.ptr), h.size)
}

// Len returns the buffer's size in bytes.
func (h *HostBuffer) Len() int { return h.size }

// DevicePtr returns the address kernels use to read a mapped buffer, or 0 if
// the buffer is not mapped.
func (h *HostBuffer) DevicePtr() DevicePtr { return h.devPtr }

// AllocHost allocates page-locked host memory. With mapped set it is
// allocated with CU_MEMHOSTALLOC_DEVICEMAP|CU_MEMHOSTALLOC_PORTABLE and its
// device address is looked up (cuMemHostGetDevicePointer_v2); otherwise it
// comes from cuMemAllocHost_v2.
func (c *Ctx) AllocHost(bytes int, mapped bool) (*HostBuffer, error) {
	if bytes <= 0 {
		return nil, fmt.Errorf("cuda: AllocHost of %d bytes", bytes)
	}
	drv := c.d.drv
	var p unsafe.Pointer
	if !mapped {
		r, _, _ := purego.SyscallN(drv.cuMemAllocHost, uintptr(unsafe.Pointer(&p)), uintptr(bytes))
		if err := drv.check("cuMemAllocHost_v2", int32(r)); err != nil {
			return nil, fmt.Errorf("alloc %d pinned host bytes: %w", bytes, err)
		}
		return &HostBuffer{ptr: p, size: bytes}, nil
	}
	if !c.d.props.canMapHost {
		return nil, errors.New("cuda: device cannot map host memory")
	}
	r, _, _ := purego.SyscallN(drv.cuMemHostAlloc, uintptr(unsafe.Pointer(&p)), uintptr(bytes), memHostAllocDeviceMap|memHostAllocPortable)
	if err := drv.check("cuMemHostAlloc", int32(r)); err != nil {
		return nil, fmt.Errorf("alloc %d mapped host bytes: %w", bytes, err)
	}
	var dp uint64
	r, _, _ = purego.SyscallN(drv.cuMemHostGetDevicePointer, uintptr(unsafe.Pointer(&dp)), uintptr(p), 0)
	if err := drv.check("cuMemHostGetDevicePointer_v2", int32(r)); err != nil {
		drv.call(drv.cuMemFreeHost, uintptr(p))
		return nil, err
	}
	return &HostBuffer{ptr: p, size: bytes, devPtr: DevicePtr(dp)}, nil
}

// FreeHost frees a buffer from AllocHost. Freeing nil or a freed buffer
// does nothing.
func (c *Ctx) FreeHost(h *HostBuffer) error {
	if h == nil || h.ptr == nil {
		return nil
	}
	drv := c.d.drv
	err := drv.check("cuMemFreeHost", drv.call(drv.cuMemFreeHost, uintptr(h.ptr)))
	h.ptr, h.size, h.devPtr = nil, 0, 0
	return err
}

// Bytes views a slice of plain numbers (no pointers) as its bytes, for
// copies: c.HtoD(p, cuda.Bytes(xs)).
func Bytes[T ~int8 | ~uint8 | ~int16 | ~uint16 | ~int32 | ~uint32 | ~int64 | ~uint64 | ~float32 | ~float64](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}

// Alloc allocates device memory; see [Ctx.Alloc].
func (d *Device) Alloc(bytes int) (p DevicePtr, err error) {
	err = d.Do(func(c *Ctx) error { p, err = c.Alloc(bytes); return err })
	return p, err
}

// Free frees device memory; see [Ctx.Free].
func (d *Device) Free(p DevicePtr) error {
	return d.Do(func(c *Ctx) error { return c.Free(p) })
}

// HtoD copies host bytes to the device; see [Ctx.HtoD].
func (d *Device) HtoD(dst DevicePtr, src []byte) error {
	return d.Do(func(c *Ctx) error { return c.HtoD(dst, src) })
}

// DtoH copies device bytes to the host; see [Ctx.DtoH].
func (d *Device) DtoH(dst []byte, src DevicePtr) error {
	return d.Do(func(c *Ctx) error { return c.DtoH(dst, src) })
}

// Synchronize waits for all work on the device.
func (d *Device) Synchronize() error {
	return d.Do(func(c *Ctx) error { return c.Synchronize() })
}
