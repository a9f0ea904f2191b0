package cuda

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Driver API constants, values from cuda.h (CUDA 13.0).
const (
	// CUdevice_attribute.
	attrMaxThreadsPerBlock        = 1
	attrMultiprocessorCount       = 16
	attrCanMapHostMemory          = 19
	attrMemoryClockRateKHz        = 36
	attrGlobalMemoryBusWidthBits  = 37
	attrL2CacheSize               = 38
	attrComputeCapabilityMajor    = 75
	attrComputeCapabilityMinor    = 76
	attrMaxSharedPerMultiproc     = 81
	attrMaxSharedPerBlockOptin    = 97
	attrMaxSharedPerBlockStandard = 8

	// CUfunction_attribute.
	funcAttrMaxThreadsPerBlock      = 0
	funcAttrSharedSizeBytes         = 1
	funcAttrLocalSizeBytes          = 3
	funcAttrNumRegs                 = 4
	funcAttrMaxDynamicSharedSizeByt = 8

	// cuStreamCreate flags.
	streamNonBlocking = 0x1 // CU_STREAM_NON_BLOCKING
	// cuEventCreate flags.
	eventDefault = 0x0 // CU_EVENT_DEFAULT: records timing
	// cuMemHostAlloc flags.
	memHostAllocPortable  = 0x01 // CU_MEMHOSTALLOC_PORTABLE
	memHostAllocDeviceMap = 0x02 // CU_MEMHOSTALLOC_DEVICEMAP
	// CUstreamCaptureMode: only this thread's calls are checked for
	// capture-unsafe operations; the owner thread is the only CUDA thread.
	streamCaptureModeThreadLocal = 1
)

// driver holds the entry points of libcuda. Symbol names are the ones cuda.h
// maps its API names to (cuMemAlloc -> cuMemAlloc_v2, ...).
type driver struct {
	lib *library

	cuInit, cuDriverGetVersion, cuGetErrorName, cuGetErrorString               uintptr
	cuDeviceGet, cuDeviceGetCount, cuDeviceGetName, cuDeviceGetAttribute       uintptr
	cuDeviceTotalMem                                                           uintptr
	cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRelease, cuCtxSetCurrent       uintptr
	cuCtxSynchronize, cuMemGetInfo                                             uintptr
	cuMemAlloc, cuMemFree, cuMemAllocHost, cuMemHostAlloc                      uintptr
	cuMemHostGetDevicePointer, cuMemFreeHost                                   uintptr
	cuMemcpyHtoD, cuMemcpyDtoH, cuMemcpyDtoD                                   uintptr
	cuMemcpyHtoDAsync, cuMemcpyDtoHAsync, cuMemcpyDtoDAsync                    uintptr
	cuMemsetD8, cuMemsetD32, cuMemsetD8Async, cuMemsetD32Async                 uintptr
	cuStreamCreate, cuStreamDestroy, cuStreamSynchronize                       uintptr
	cuEventCreate, cuEventRecord, cuEventSynchronize, cuEventElapsedTime       uintptr
	cuStreamWaitEvent, cuStreamCreateWithPriority, cuCtxGetStreamPriorityRange uintptr
	cuEventDestroy                                                             uintptr
	cuModuleLoadData, cuModuleGetFunction, cuModuleUnload                      uintptr
	cuFuncSetAttribute, cuFuncGetAttribute, cuLaunchKernel                     uintptr
	cuLaunchKernelEx                                                           uintptr // 0 before CUDA 12.0
	cuStreamBeginCapture, cuStreamEndCapture, cuGraphInstantiate               uintptr
	cuGraphLaunch, cuGraphExecDestroy, cuGraphDestroy                          uintptr
	cuOccupancyMaxActiveBlocksPerMultiprocessor                                uintptr
	nameEventElapsedTime                                                       string
}

var (
	driverOnce sync.Once
	driverLib  *driver
	driverErr  error
)

// loadDriver opens libcuda, binds its symbols and calls cuInit, once per
// process. Failures wrap ErrNoDriver (or ErrNoDevice when cuInit reports
// CUDA_ERROR_NO_DEVICE).
func loadDriver() (*driver, error) {
	driverOnce.Do(func() {
		driverLib, driverErr = openDriver(currentConfig(libDriver), dlopenNow)
	})
	return driverLib, driverErr
}

func openDriver(c Config, open opener) (*driver, error) {
	lib, err := openLibrary(specDriver, c, open)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoDriver, err)
	}
	d, err := bindDriver(lib)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoDriver, err)
	}
	if err := d.check("cuInit", d.call(d.cuInit, 0)); err != nil {
		if e, ok := err.(*Error); ok && e.Code == cudaErrNoDevice {
			return nil, fmt.Errorf("%w: %v", ErrNoDevice, err)
		}
		return nil, fmt.Errorf("%w: %v", ErrNoDriver, err)
	}
	return d, nil
}

func bindDriver(lib *library) (*driver, error) {
	s := &symbols{lib: lib}
	d := &driver{lib: lib}
	d.cuInit = s.need("cuInit")
	d.cuDriverGetVersion = s.need("cuDriverGetVersion")
	d.cuGetErrorName = s.need("cuGetErrorName")
	d.cuGetErrorString = s.need("cuGetErrorString")
	d.cuDeviceGet = s.need("cuDeviceGet")
	d.cuDeviceGetCount = s.need("cuDeviceGetCount")
	d.cuDeviceGetName = s.need("cuDeviceGetName")
	d.cuDeviceGetAttribute = s.need("cuDeviceGetAttribute")
	d.cuDeviceTotalMem = s.need("cuDeviceTotalMem_v2")
	d.cuDevicePrimaryCtxRetain = s.need("cuDevicePrimaryCtxRetain")
	d.cuDevicePrimaryCtxRelease = s.need("cuDevicePrimaryCtxRelease_v2")
	d.cuCtxSetCurrent = s.need("cuCtxSetCurrent")
	d.cuCtxSynchronize = s.need("cuCtxSynchronize")
	d.cuMemGetInfo = s.need("cuMemGetInfo_v2")
	d.cuMemAlloc = s.need("cuMemAlloc_v2")
	d.cuMemFree = s.need("cuMemFree_v2")
	d.cuMemAllocHost = s.need("cuMemAllocHost_v2")
	d.cuMemHostAlloc = s.need("cuMemHostAlloc")
	d.cuMemHostGetDevicePointer = s.need("cuMemHostGetDevicePointer_v2")
	d.cuMemFreeHost = s.need("cuMemFreeHost")
	d.cuMemcpyHtoD = s.need("cuMemcpyHtoD_v2")
	d.cuMemcpyDtoH = s.need("cuMemcpyDtoH_v2")
	d.cuMemcpyDtoD = s.need("cuMemcpyDtoD_v2")
	d.cuMemcpyHtoDAsync = s.need("cuMemcpyHtoDAsync_v2")
	d.cuMemcpyDtoHAsync = s.need("cuMemcpyDtoHAsync_v2")
	d.cuMemcpyDtoDAsync = s.need("cuMemcpyDtoDAsync_v2")
	d.cuMemsetD8 = s.need("cuMemsetD8_v2")
	d.cuMemsetD32 = s.need("cuMemsetD32_v2")
	d.cuMemsetD8Async = s.need("cuMemsetD8Async")
	d.cuMemsetD32Async = s.need("cuMemsetD32Async")
	d.cuStreamCreate = s.need("cuStreamCreate")
	d.cuStreamDestroy = s.need("cuStreamDestroy_v2")
	d.cuStreamSynchronize = s.need("cuStreamSynchronize")
	d.cuEventCreate = s.need("cuEventCreate")
	d.cuEventRecord = s.need("cuEventRecord")
	d.cuStreamWaitEvent = s.need("cuStreamWaitEvent")
	d.cuStreamCreateWithPriority = s.need("cuStreamCreateWithPriority")
	d.cuCtxGetStreamPriorityRange = s.need("cuCtxGetStreamPriorityRange")
	d.cuEventSynchronize = s.need("cuEventSynchronize")
	// CUDA 13's header maps cuEventElapsedTime to _v2; 12.x drivers before
	// 12.8 have only the original, which has the same signature.
	d.nameEventElapsedTime = "cuEventElapsedTime_v2"
	if d.cuEventElapsedTime = s.optional("cuEventElapsedTime_v2"); d.cuEventElapsedTime == 0 {
		d.nameEventElapsedTime = "cuEventElapsedTime"
		d.cuEventElapsedTime = s.need("cuEventElapsedTime")
	}
	d.cuEventDestroy = s.need("cuEventDestroy_v2")
	d.cuModuleLoadData = s.need("cuModuleLoadData")
	d.cuModuleGetFunction = s.need("cuModuleGetFunction")
	d.cuModuleUnload = s.need("cuModuleUnload")
	d.cuFuncSetAttribute = s.need("cuFuncSetAttribute")
	d.cuFuncGetAttribute = s.need("cuFuncGetAttribute")
	d.cuLaunchKernel = s.need("cuLaunchKernel")
	// CUDA 12.0's launch with attributes (programmatic dependent launch);
	// older drivers launch every kernel with cuLaunchKernel.
	d.cuLaunchKernelEx = s.optional("cuLaunchKernelEx")
	d.cuStreamBeginCapture = s.need("cuStreamBeginCapture_v2")
	d.cuStreamEndCapture = s.need("cuStreamEndCapture")
	d.cuGraphInstantiate = s.need("cuGraphInstantiateWithFlags")
	d.cuGraphLaunch = s.need("cuGraphLaunch")
	d.cuGraphExecDestroy = s.need("cuGraphExecDestroy")
	d.cuGraphDestroy = s.need("cuGraphDestroy")
	d.cuOccupancyMaxActiveBlocksPerMultiprocessor = s.need("cuOccupancyMaxActiveBlocksPerMultiprocessor")
	if s.err != nil {
		return nil, s.err
	}
	return d, nil
}

// call invokes a driver function and returns its CUresult. CUresult is a
// 32-bit enum returned in the low half of the register; the upper half is
// not defined by the ABI and is discarded.
//
// Arguments that are Go pointers must be converted with
// uintptr(unsafe.Pointer(p)) in the argument list of purego.SyscallN
// itself (it is marked go:uintptrescapes), so they are not passed through
// call; pointer-taking wrappers call purego.SyscallN directly.
func (d *driver) call(fn uintptr, args ...uintptr) int32 {
	r, _, _ := purego.SyscallN(fn, args...)
	return int32(r)
}

// check turns a CUresult into nil or an *Error for the named call.
func (d *driver) check(call string, r int32) error {
	if r == cudaSuccess {
		return nil
	}
	return d.newError(call, r)
}

func (d *driver) newError(call string, r int32) *Error {
	e := &Error{Call: call, Code: int(r)}
	var p uintptr
	if res, _, _ := purego.SyscallN(d.cuGetErrorName, uintptr(r), uintptr(unsafe.Pointer(&p))); int32(res) == cudaSuccess {
		e.Name = goString(p)
	} else {
		e.Name = fmt.Sprintf("CUDA_ERROR_%d", r)
	}
	p = 0
	if res, _, _ := purego.SyscallN(d.cuGetErrorString, uintptr(r), uintptr(unsafe.Pointer(&p))); int32(res) == cudaSuccess {
		e.Msg = goString(p)
	}
	return e
}

// version returns the driver's CUDA version, e.g. 13000 for 13.0.
func (d *driver) version() (int, error) {
	var v int32
	r, _, _ := purego.SyscallN(d.cuDriverGetVersion, uintptr(unsafe.Pointer(&v)))
	return int(v), d.check("cuDriverGetVersion", int32(r))
}

func (d *driver) deviceCount() (int, error) {
	var n int32
	r, _, _ := purego.SyscallN(d.cuDeviceGetCount, uintptr(unsafe.Pointer(&n)))
	return int(n), d.check("cuDeviceGetCount", int32(r))
}

func (d *driver) deviceGet(ordinal int) (int32, error) {
	var dev int32
	r, _, _ := purego.SyscallN(d.cuDeviceGet, uintptr(unsafe.Pointer(&dev)), uintptr(ordinal))
	return dev, d.check("cuDeviceGet", int32(r))
}

func (d *driver) deviceName(dev int32) (string, error) {
	var buf [256]byte
	r, _, _ := purego.SyscallN(d.cuDeviceGetName, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), uintptr(dev))
	if err := d.check("cuDeviceGetName", int32(r)); err != nil {
		return "", err
	}
	return trimNUL(buf[:]), nil
}

func (d *driver) deviceAttr(dev int32, attr int) (int, error) {
	var v int32
	r, _, _ := purego.SyscallN(d.cuDeviceGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(attr), uintptr(dev))
	if err := d.check("cuDeviceGetAttribute", int32(r)); err != nil {
		return 0, fmt.Errorf("attribute %d: %w", attr, err)
	}
	return int(v), nil
}

func (d *driver) deviceTotalMem(dev int32) (uint64, error) {
	var n uint64
	r, _, _ := purego.SyscallN(d.cuDeviceTotalMem, uintptr(unsafe.Pointer(&n)), uintptr(dev))
	return n, d.check("cuDeviceTotalMem_v2", int32(r))
}
