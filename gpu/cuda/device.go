package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// DevicePtr is an address in device memory (CUdeviceptr). Offsets are plain
// additions: p + DevicePtr(bytes).
type DevicePtr uint64

// Stream is a CUDA stream. The zero Stream is the legacy default stream,
// which synchronizes with all others and cannot be captured into a graph;
// prefer [Device.Stream].
type Stream uintptr

// Event is a CUDA event that records timing.
type Event uintptr

// Device is one GPU with its primary context, owned by one locked OS thread.
// All methods are safe for concurrent use; see [Device.Do].
type Device struct {
	ordinal int
	drv     *driver
	own     *owner
	ctx     *Ctx // the owner thread's view; used only on the owner

	cuDev  int32
	pctx   uintptr
	stream Stream
	props  deviceProps

	modMu        sync.Mutex
	modules      map[cacheKey]*moduleEntry
	extraModules []*Module // private copies built on the owner thread
}

// deviceProps are the attributes read once at Open.
type deviceProps struct {
	name                  string
	major, minor          int
	sms                   int
	l2Bytes               int
	sharedPerBlockOptin   int
	sharedPerBlock        int
	sharedPerSM           int
	maxThreadsPerBlock    int
	canMapHost            bool
	memTotal              uint64
	memClockKHz, busWidth int
}

// Ctx is the owner thread's view of a Device: its methods call the driver
// directly, with no hand-off. A Ctx is handed to the function given to
// [Device.Do] and is valid only while that function runs.
type Ctx struct {
	d    *Device
	args argPacker
	blas *blasState // created by the first GEMM
	// capturing counts this Ctx's streams between BeginCapture and
	// EndCapture: GEMM does not tune while one is capturing.
	capturing int
	gemmTune  bool // SetGEMMTuning; off by default
	// dependent: Launch starts GridDependent kernels as programmatic
	// dependents (SetGridDependentLaunch; on by default where supported).
	dependent bool
	ex        *launchEx // cuLaunchKernelEx's argument block, made at first use
	exPin     runtime.Pinner
}

// Available reports whether a CUDA driver and at least one device are
// present. The error wraps ErrNoDriver or ErrNoDevice and says why.
func Available() error {
	_, err := DeviceCount()
	return err
}

// DeviceCount returns the number of CUDA devices. With no driver or no
// device it returns an error wrapping ErrNoDriver or ErrNoDevice.
func DeviceCount() (int, error) {
	drv, err := loadDriver()
	if err != nil {
		return 0, err
	}
	n, err := drv.deviceCount()
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrNoDevice, err)
	}
	if n == 0 {
		return 0, fmt.Errorf("%w: the driver reports 0 devices", ErrNoDevice)
	}
	return n, nil
}

// Open opens device ordinal (0 is the first GPU): it loads the driver,
// starts the owner thread, makes the device's primary context current there
// and creates the Device's stream. Close releases them.
func Open(ordinal int) (*Device, error) {
	n, err := DeviceCount()
	if err != nil {
		return nil, err
	}
	if ordinal < 0 || ordinal >= n {
		return nil, fmt.Errorf("%w: device %d requested, %d present", ErrNoDevice, ordinal, n)
	}
	drv, _ := loadDriver()
	d := &Device{ordinal: ordinal, drv: drv, modules: map[cacheKey]*moduleEntry{}}
	d.ctx = &Ctx{d: d}
	d.own, err = startOwner(d.setup, d.teardown)
	if err != nil {
		return nil, fmt.Errorf("cuda: open device %d: %w", ordinal, err)
	}
	return d, nil
}

// setup runs on the owner thread.
func (d *Device) setup() error {
	drv := d.drv
	dev, err := drv.deviceGet(d.ordinal)
	if err != nil {
		return err
	}
	d.cuDev = dev
	var pctx uintptr
	r, _, _ := purego.SyscallN(drv.cuDevicePrimaryCtxRetain, uintptr(unsafe.Pointer(&pctx)), uintptr(dev))
	if err := drv.check("cuDevicePrimaryCtxRetain", int32(r)); err != nil {
		return err
	}
	d.pctx = pctx
	fail := func(err error) error {
		drv.call(drv.cuCtxSetCurrent, 0)
		drv.call(drv.cuDevicePrimaryCtxRelease, uintptr(dev))
		return err
	}
	if err := drv.check("cuCtxSetCurrent", drv.call(drv.cuCtxSetCurrent, pctx)); err != nil {
		return fail(err)
	}
	if err := d.readProps(); err != nil {
		return fail(err)
	}
	d.ctx.SetGridDependentLaunch(true)
	s, err := d.ctx.NewStream()
	if err != nil {
		return fail(err)
	}
	d.stream = s
	return nil
}

func (d *Device) readProps() error {
	drv, dev := d.drv, d.cuDev
	p := &d.props
	var err error
	if p.name, err = drv.deviceName(dev); err != nil {
		return err
	}
	if p.memTotal, err = drv.deviceTotalMem(dev); err != nil {
		return err
	}
	attrs := []struct {
		attr int
		dst  *int
	}{
		{attrComputeCapabilityMajor, &p.major},
		{attrComputeCapabilityMinor, &p.minor},
		{attrMultiprocessorCount, &p.sms},
		{attrL2CacheSize, &p.l2Bytes},
		{attrMaxSharedPerBlockOptin, &p.sharedPerBlockOptin},
		{attrMaxSharedPerBlockStandard, &p.sharedPerBlock},
		{attrMaxSharedPerMultiproc, &p.sharedPerSM},
		{attrMaxThreadsPerBlock, &p.maxThreadsPerBlock},
		{attrMemoryClockRateKHz, &p.memClockKHz},
		{attrGlobalMemoryBusWidthBits, &p.busWidth},
	}
	for _, a := range attrs {
		if *a.dst, err = drv.deviceAttr(dev, a.attr); err != nil {
			return err
		}
	}
	mapHost, err := drv.deviceAttr(dev, attrCanMapHostMemory)
	if err != nil {
		return err
	}
	p.canMapHost = mapHost != 0
	return nil
}

// teardown runs on the owner thread at Close.
func (d *Device) teardown() {
	drv := d.drv
	c := d.ctx
	drv.call(drv.cuCtxSynchronize)
	c.closeBLAS()
	d.modMu.Lock()
	mods := d.extraModules
	for k, e := range d.modules {
		select {
		case <-e.done:
			if e.mod != nil {
				mods = append(mods, e.mod)
			}
		default: // still building; its load will fail with ErrClosed
		}
		delete(d.modules, k)
	}
	d.extraModules = nil
	d.modMu.Unlock()
	for _, m := range mods {
		m.mu.Lock()
		if m.h != 0 {
			drv.call(drv.cuModuleUnload, m.h)
			m.h = 0
		}
		m.funcs = map[string]Function{}
		m.mu.Unlock()
	}
	if d.stream != 0 {
		drv.call(drv.cuStreamDestroy, uintptr(d.stream))
		d.stream = 0
	}
	c.args.release()
	c.exPin.Unpin()
	c.ex = nil
	drv.call(drv.cuCtxSetCurrent, 0)
	drv.call(drv.cuDevicePrimaryCtxRelease, uintptr(d.cuDev))
}

// Close waits for running work, frees what the Device created (its stream,
// compiled modules, cuBLASLt state) and releases the primary context.
// Memory, streams, events and graphs made by the caller should be freed
// first. Calling Close again returns nil.
func (d *Device) Close() error {
	return d.own.Close()
}

// Do runs f on the owner thread with the device's context current and
// returns f's error. Concurrent calls run one at a time, in no set order.
// Called from inside another Do function, it runs f inline. A panic in f is
// re-raised in the caller.
func (d *Device) Do(f func(c *Ctx) error) error {
	return d.own.Do(func() error { return f(d.ctx) })
}

// Ordinal returns the device's index as passed to Open.
func (d *Device) Ordinal() int { return d.ordinal }

// Name returns the device's name, e.g. "NVIDIA H100 80GB HBM3".
func (d *Device) Name() string { return d.props.name }

// ComputeCapability returns the major and minor compute capability, e.g.
// 9, 0 on Hopper.
func (d *Device) ComputeCapability() (major, minor int) { return d.props.major, d.props.minor }

// Arch returns the NVRTC target for this device: "sm_90a" on compute
// capability 9.0 (so Hopper-only instructions such as wgmma are available),
// "sm_XY" otherwise.
func (d *Device) Arch() string { return archName(d.props.major, d.props.minor) }

// SMs returns the number of streaming multiprocessors.
func (d *Device) SMs() int { return d.props.sms }

// MaxSharedPerBlock returns the largest dynamic+static shared memory one
// block may use after opting in with [Ctx.SetMaxDynamicShared], in bytes.
func (d *Device) MaxSharedPerBlock() int { return d.props.sharedPerBlockOptin }

// MaxSharedPerSM returns the shared memory one SM holds for all its
// resident blocks together, in bytes (each block also takes the part the
// system reserves for it).
func (d *Device) MaxSharedPerSM() int { return d.props.sharedPerSM }

// Stream returns the Device's own stream, created non-blocking at Open. It
// can be captured into graphs.
func (d *Device) Stream() Stream { return d.stream }

// archName maps a compute capability to an NVRTC --gpu-architecture value.
func archName(major, minor int) string {
	if major == 9 && minor == 0 {
		return "sm_90a"
	}
	return fmt.Sprintf("sm_%d%d", major, minor)
}

// Device returns the Device this Ctx belongs to.
func (c *Ctx) Device() *Device { return c.d }

// Synchronize waits for all work on the device (cuCtxSynchronize).
func (c *Ctx) Synchronize() error {
	drv := c.d.drv
	return drv.check("cuCtxSynchronize", drv.call(drv.cuCtxSynchronize))
}

// MemInfo returns free and total device memory in bytes.
func (c *Ctx) MemInfo() (free, total uint64, err error) {
	drv := c.d.drv
	r, _, _ := purego.SyscallN(drv.cuMemGetInfo, uintptr(unsafe.Pointer(&free)), uintptr(unsafe.Pointer(&total)))
	return free, total, drv.check("cuMemGetInfo_v2", int32(r))
}

// NewStream creates a non-blocking stream.
func (c *Ctx) NewStream() (Stream, error) {
	drv := c.d.drv
	var s uintptr
	r, _, _ := purego.SyscallN(drv.cuStreamCreate, uintptr(unsafe.Pointer(&s)), streamNonBlocking)
	return Stream(s), drv.check("cuStreamCreate", int32(r))
}

// NewPriorityStream creates a non-blocking stream of the highest priority
// the device offers: its pending thread blocks are scheduled before those of
// other streams (work beside a kernel that fills the GPU, such as DEC's
// beside the base GEMV).
func (c *Ctx) NewPriorityStream() (Stream, error) {
	drv := c.d.drv
	var least, greatest int32
	r, _, _ := purego.SyscallN(drv.cuCtxGetStreamPriorityRange, uintptr(unsafe.Pointer(&least)), uintptr(unsafe.Pointer(&greatest)))
	if err := drv.check("cuCtxGetStreamPriorityRange", int32(r)); err != nil {
		return 0, err
	}
	var s uintptr
	r, _, _ = purego.SyscallN(drv.cuStreamCreateWithPriority, uintptr(unsafe.Pointer(&s)), streamNonBlocking, uintptr(greatest))
	return Stream(s), drv.check("cuStreamCreateWithPriority", int32(r))
}

// DestroyStream destroys s. Work already queued on it still runs.
func (c *Ctx) DestroyStream(s Stream) error {
	if s == 0 {
		return errors.New("cuda: DestroyStream of the default stream")
	}
	drv := c.d.drv
	return drv.check("cuStreamDestroy_v2", drv.call(drv.cuStreamDestroy, uintptr(s)))
}

// SyncStream waits until all work queued on s is done.
func (c *Ctx) SyncStream(s Stream) error {
	drv := c.d.drv
	return drv.check("cuStreamSynchronize", drv.call(drv.cuStreamSynchronize, uintptr(s)))
}

// NewEvent creates an event that records timing.
func (c *Ctx) NewEvent() (Event, error) {
	drv := c.d.drv
	var e uintptr
	r, _, _ := purego.SyscallN(drv.cuEventCreate, uintptr(unsafe.Pointer(&e)), eventDefault)
	return Event(e), drv.check("cuEventCreate", int32(r))
}

// Record records e on s.
func (c *Ctx) Record(e Event, s Stream) error {
	drv := c.d.drv
	return drv.check("cuEventRecord", drv.call(drv.cuEventRecord, uintptr(e), uintptr(s)))
}

// WaitEvent makes the work queued on s after this call wait until e (as
// last recorded) has completed, without blocking the host. Inside a stream
// capture it joins s to the capture (fork/join across streams).
func (c *Ctx) WaitEvent(s Stream, e Event) error {
	drv := c.d.drv
	return drv.check("cuStreamWaitEvent", drv.call(drv.cuStreamWaitEvent, uintptr(s), uintptr(e), 0))
}

// SyncEvent waits until e has completed.
func (c *Ctx) SyncEvent(e Event) error {
	drv := c.d.drv
	return drv.check("cuEventSynchronize", drv.call(drv.cuEventSynchronize, uintptr(e)))
}

// ElapsedMS waits for end, then returns the milliseconds between start and
// end (resolution about half a microsecond).
func (c *Ctx) ElapsedMS(start, end Event) (float32, error) {
	if err := c.SyncEvent(end); err != nil {
		return 0, err
	}
	drv := c.d.drv
	var ms float32
	r, _, _ := purego.SyscallN(drv.cuEventElapsedTime, uintptr(unsafe.Pointer(&ms)), uintptr(start), uintptr(end))
	return ms, drv.check(drv.nameEventElapsedTime, int32(r))
}

// DestroyEvent destroys e.
func (c *Ctx) DestroyEvent(e Event) error {
	drv := c.d.drv
	return drv.check("cuEventDestroy_v2", drv.call(drv.cuEventDestroy, uintptr(e)))
}
