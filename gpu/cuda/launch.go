package cuda

import (
	"errors"
	"fmt"
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
}

// Name returns the name expression or symbol the function was looked up by.
func (f Function) Name() string { return f.name }

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
	return drv.check("cuStreamBeginCapture_v2", drv.call(drv.cuStreamBeginCapture, uintptr(s), streamCaptureModeThreadLocal))
}

// EndCapture ends the capture on s and instantiates the captured graph.
func (c *Ctx) EndCapture(s Stream) (*Graph, error) {
	drv := c.d.drv
	var g uintptr
	r, _, _ := purego.SyscallN(drv.cuStreamEndCapture, uintptr(s), uintptr(unsafe.Pointer(&g)))
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
