package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Dim3 is a grid or block size. A zero component means 1, so Dim3{X: 128}
// is a one-dimensional block of 128 threads.
type Dim3 struct{ X, Y, Z int }

func (d Dim3) norm() (x, y, z uintptr, err error) {
	one := func(v int) (uintptr, error) {
		if v < 0 || v > 1<<31-1 {
			return 0, fmt.Errorf("cuda: dimension %d out of range", v)
		}
		if v == 0 {
			return 1, nil
		}
		return uintptr(v), nil
	}
	if x, err = one(d.X); err != nil {
		return
	}
	if y, err = one(d.Y); err != nil {
		return
	}
	z, err = one(d.Z)
	return
}

// Function is a kernel of a loaded module. Its name (the name expression or
// symbol it was looked up by) appears in launch errors.
type Function struct {
	h    uintptr
	name string
	// dependent: the kernel's program is GridDependent (it waits for the
	// kernel ahead of it itself), so Launch may start it early.
	dependent bool
}

// Name returns the name expression or symbol the function was looked up by.
func (f Function) Name() string { return f.name }

// GridDependent reports whether f's program declared
// [Program.GridDependent]: f waits for the kernel queued ahead of it
// (griddepcontrol.wait) and is launched as a programmatic dependent where
// the Ctx allows it.
func (f Function) GridDependent() bool { return f.dependent }

// The driver's launch configuration for cuLaunchKernelEx (cuda.h, CUDA
// 12.0 and later), laid out as the C structs.
const (
	// launchAttrProgrammaticStreamSerialization is
	// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION: the kernel may
	// start once the kernel ahead of it on the stream has triggered
	// (griddepcontrol.launch_dependents, or each of its blocks exited);
	// under stream capture it becomes a programmatic graph edge.
	launchAttrProgrammaticStreamSerialization = 6
	// launchAttrValueBytes is sizeof(CUlaunchAttributeValue), a union.
	launchAttrValueBytes = 64
)

// launchAttr is CUlaunchAttribute: an id, padding to 8 bytes, the value.
type launchAttr struct {
	id  uint32
	_   uint32
	val [launchAttrValueBytes]byte
}

// launchConfig is CUlaunchConfig.
type launchConfig struct {
	gridX, gridY, gridZ    uint32
	blockX, blockY, blockZ uint32
	sharedBytes            uint32
	_                      uint32
	stream                 uintptr
	attrs                  uintptr // *launchAttr, pinned
	numAttrs               uint32
	_                      uint32
}

// launchEx is the Ctx's reusable cuLaunchKernelEx argument block, pinned
// while the Ctx lives (the config holds the address of the attribute).
type launchEx struct {
	cfg  launchConfig
	attr launchAttr
}

// newLaunchEx returns a block, pinned by pin, whose one attribute allows
// programmatic stream serialization.
func newLaunchEx(pin *runtime.Pinner) *launchEx {
	l := &launchEx{}
	pin.Pin(l)
	l.attr.id = launchAttrProgrammaticStreamSerialization
	l.attr.val[0] = 1 // programmaticStreamSerializationAllowed (an int)
	l.cfg.attrs = uintptr(unsafe.Pointer(&l.attr))
	l.cfg.numAttrs = 1
	return l
}

// SetGridDependentLaunch sets whether Launch starts the kernels of
// GridDependent programs as programmatic dependents (they then overlap
// the tail of the kernel ahead of them, up to their
// griddepcontrol.wait), and returns the previous setting. It is on by
// default where the device (compute capability 9.0 and later) and the
// driver (cuLaunchKernelEx) support it; on is ignored elsewhere. The
// setting belongs to the Ctx, so a caller that changes it for its own
// launches restores it after them.
func (c *Ctx) SetGridDependentLaunch(on bool) (prev bool) {
	prev = c.dependent
	c.dependent = on && c.d.gridDependentOK()
	return prev
}

// GridDependentLaunch reports whether Launch starts GridDependent kernels
// as programmatic dependents.
func (c *Ctx) GridDependentLaunch() bool { return c.dependent }

// gridDependentOK reports whether programmatic dependent launch works on
// d: compute capability 9.0 or later and a driver with cuLaunchKernelEx.
func (d *Device) gridDependentOK() bool {
	return d.props.major >= 9 && d.drv.cuLaunchKernelEx != 0
}

// Launch queues kernel f on stream s with the given grid, block and dynamic
// shared memory (bytes). args are the kernel's parameters in order, each a
// DevicePtr, int32, uint32, float32, int64, uint64, float64, int16, uint16,
// int8, uint8, or a []byte holding a struct passed by value; their sizes
// must match the kernel's parameters. Errors name the kernel.
func (c *Ctx) Launch(f Function, grid, block Dim3, sharedBytes int, s Stream, args ...any) error {
	if f.h == 0 {
		return errors.New("cuda: Launch of a zero Function")
	}
	gx, gy, gz, err := grid.norm()
	if err != nil {
		return fmt.Errorf("launch %s grid: %w", f.name, err)
	}
	bx, by, bz, err := block.norm()
	if err != nil {
		return fmt.Errorf("launch %s block: %w", f.name, err)
	}
	if sharedBytes < 0 {
		return fmt.Errorf("cuda: launch %s with %d shared bytes", f.name, sharedBytes)
	}
	params, err := c.args.pack(args)
	if err != nil {
		return fmt.Errorf("launch %s: %w", f.name, err)
	}
	drv := c.d.drv
	if f.dependent && c.dependent && s != 0 {
		// The one place the programmatic attribute is added: only kernels
		// of GridDependent programs, which wait for their predecessor
		// themselves, get it; never on the legacy default stream, whose
		// implicit synchronization with other streams it would not keep.
		if c.ex == nil {
			c.ex = newLaunchEx(&c.exPin)
		}
		cfg := &c.ex.cfg
		cfg.gridX, cfg.gridY, cfg.gridZ = uint32(gx), uint32(gy), uint32(gz)
		cfg.blockX, cfg.blockY, cfg.blockZ = uint32(bx), uint32(by), uint32(bz)
		cfg.sharedBytes, cfg.stream = uint32(sharedBytes), uintptr(s)
		// cfg and params point into pinned Go heap memory owned by c.
		r, _, _ := purego.SyscallN(drv.cuLaunchKernelEx, uintptr(unsafe.Pointer(cfg)), f.h, uintptr(params), 0)
		if int32(r) != cudaSuccess {
			e := drv.newError("cuLaunchKernelEx", int32(r))
			e.Kernel = f.name
			return e
		}
		return nil
	}
	// params points into pinned Go heap memory owned by c.args.
	r, _, _ := purego.SyscallN(drv.cuLaunchKernel, f.h, gx, gy, gz, bx, by, bz,
		uintptr(sharedBytes), uintptr(s), uintptr(params), 0)
	if int32(r) != cudaSuccess {
		e := drv.newError("cuLaunchKernel", int32(r))
		e.Kernel = f.name
		return e
	}
	return nil
}

// SetMaxDynamicShared lets f use up to bytes of dynamic shared memory per
// block (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES); needed above
// 48 KiB, up to [Device.MaxSharedPerBlock] less the static shared memory.
// The limit only rises: a kernel is one function for every plan that
// compiled the same program (a pack kernel serves every residual size of
// its layout), and a plan for a smaller launch must not lower the limit
// that another plan's launches rely on.
func (c *Ctx) SetMaxDynamicShared(f Function, bytes int) error {
	drv := c.d.drv
	var cur int32
	r, _, _ := purego.SyscallN(drv.cuFuncGetAttribute, uintptr(unsafe.Pointer(&cur)), uintptr(funcAttrMaxDynamicSharedSizeByt), f.h)
	if err := drv.check("cuFuncGetAttribute", int32(r)); err != nil {
		err.(*Error).Kernel = f.name
		return err
	}
	if bytes <= int(cur) {
		return nil
	}
	if err := drv.check("cuFuncSetAttribute", drv.call(drv.cuFuncSetAttribute, f.h, funcAttrMaxDynamicSharedSizeByt, uintptr(bytes))); err != nil {
		err.(*Error).Kernel = f.name
		return err
	}
	return nil
}

// FuncInfo describes a compiled kernel's resource use.
type FuncInfo struct {
	Registers          int // registers per thread
	StaticSharedBytes  int // statically allocated shared memory per block
	LocalBytes         int // local memory (spills, stack) per thread
	MaxThreadsPerBlock int // the largest block this kernel can launch with
}

// FuncInfo reads f's resource use (cuFuncGetAttribute).
func (c *Ctx) FuncInfo(f Function) (FuncInfo, error) {
	var fi FuncInfo
	for _, a := range []struct {
		attr int
		dst  *int
	}{
		{funcAttrNumRegs, &fi.Registers},
		{funcAttrSharedSizeBytes, &fi.StaticSharedBytes},
		{funcAttrLocalSizeBytes, &fi.LocalBytes},
		{funcAttrMaxThreadsPerBlock, &fi.MaxThreadsPerBlock},
	} {
		var v int32
		drv := c.d.drv
		r, _, _ := purego.SyscallN(drv.cuFuncGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(a.attr), f.h)
		if err := drv.check("cuFuncGetAttribute", int32(r)); err != nil {
			err.(*Error).Kernel = f.name
			return fi, err
		}
		*a.dst = int(v)
	}
	return fi, nil
}

// MaxActiveBlocksPerSM returns how many blocks of blockThreads threads and
// dynamicSharedBytes of dynamic shared memory fit on one SM at once.
func (c *Ctx) MaxActiveBlocksPerSM(f Function, blockThreads, dynamicSharedBytes int) (int, error) {
	drv := c.d.drv
	var n int32
	r, _, _ := purego.SyscallN(drv.cuOccupancyMaxActiveBlocksPerMultiprocessor, uintptr(unsafe.Pointer(&n)), f.h,
		uintptr(blockThreads), uintptr(dynamicSharedBytes))
	if err := drv.check("cuOccupancyMaxActiveBlocksPerMultiprocessor", int32(r)); err != nil {
		err.(*Error).Kernel = f.name
		return 0, err
	}
	return int(n), nil
}

// Launch queues a kernel on the Device; see [Ctx.Launch].
func (d *Device) Launch(f Function, grid, block Dim3, sharedBytes int, s Stream, args ...any) error {
	return d.Do(func(c *Ctx) error { return c.Launch(f, grid, block, sharedBytes, s, args...) })
}

// Graph is an instantiated CUDA graph, captured from a stream with
// [Ctx.BeginCapture] and [Ctx.EndCapture], replayed with [Ctx.LaunchGraph].
type Graph struct {
	graph uintptr // CUgraph
	exec  uintptr // CUgraphExec
}

// BeginCapture starts capturing the work queued on s into a graph instead
// of running it. s must not be the legacy default stream. Capture mode is
// thread-local: only the owner thread issues CUDA calls.
func (c *Ctx) BeginCapture(s Stream) error {
	if s == 0 {
		return errors.New("cuda: cannot capture the legacy default stream; use Device.Stream or NewStream")
	}
	drv := c.d.drv
	if err := drv.check("cuStreamBeginCapture_v2", drv.call(drv.cuStreamBeginCapture, uintptr(s), streamCaptureModeThreadLocal)); err != nil {
		return err
	}
	c.capturing++
	return nil
}

// EndCapture ends the capture on s and instantiates the captured graph.
func (c *Ctx) EndCapture(s Stream) (*Graph, error) {
	drv := c.d.drv
	var g uintptr
	r, _, _ := purego.SyscallN(drv.cuStreamEndCapture, uintptr(s), uintptr(unsafe.Pointer(&g)))
	if c.capturing > 0 {
		c.capturing--
	}
	if err := drv.check("cuStreamEndCapture", int32(r)); err != nil {
		if g != 0 {
			drv.call(drv.cuGraphDestroy, g)
		}
		return nil, err
	}
	var exec uintptr
	r, _, _ = purego.SyscallN(drv.cuGraphInstantiate, uintptr(unsafe.Pointer(&exec)), g, 0)
	if err := drv.check("cuGraphInstantiateWithFlags", int32(r)); err != nil {
		drv.call(drv.cuGraphDestroy, g)
		return nil, err
	}
	return &Graph{graph: g, exec: exec}, nil
}

// LaunchGraph queues one replay of g on s.
func (c *Ctx) LaunchGraph(g *Graph, s Stream) error {
	if g == nil || g.exec == 0 {
		return errors.New("cuda: LaunchGraph of a destroyed graph")
	}
	drv := c.d.drv
	return drv.check("cuGraphLaunch", drv.call(drv.cuGraphLaunch, g.exec, uintptr(s)))
}

// DestroyGraph frees g. Replays already queued still run.
func (c *Ctx) DestroyGraph(g *Graph) error {
	if g == nil {
		return nil
	}
	drv := c.d.drv
	var err error
	if g.exec != 0 {
		err = drv.check("cuGraphExecDestroy", drv.call(drv.cuGraphExecDestroy, g.exec))
		g.exec = 0
	}
	if g.graph != 0 {
		if e := drv.check("cuGraphDestroy", drv.call(drv.cuGraphDestroy, g.graph)); err == nil {
			err = e
		}
		g.graph = 0
	}
	return err
}
