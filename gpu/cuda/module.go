package cuda

import (
	"fmt"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Module is a compiled program loaded on a Device. Modules are shared: the
// Device keeps one per distinct program and unloads them at Close.
type Module struct {
	d         *Device
	h         uintptr // CUmodule; 0 after the Device closed
	name      string
	lowered   map[string]string // name expression -> lowered name
	fromCache bool
	log       string
	// dependent is the program's GridDependent: every kernel looked up
	// in the module is launched as a programmatic dependent.
	dependent bool

	mu    sync.Mutex
	funcs map[string]Function
}

// moduleEntry deduplicates concurrent compilations of one program; done is
// closed once mod and err are set.
type moduleEntry struct {
	done chan struct{}
	mod  *Module
	err  error
}

// Compile compiles p with NVRTC for this device's architecture (through the
// CUBIN cache) and loads it. Compiling the same program again returns the
// same Module. Compilation runs on the calling goroutine; only loading uses
// the owner thread. Errors: ErrNoNVRTC when NVRTC is missing, a
// *CompileError with the compiler log when the source does not compile.
func (d *Device) Compile(p Program) (*Module, error) {
	n, err := loadNVRTC()
	if err != nil {
		return nil, err
	}
	if p.Name == "" {
		p.Name = "program.cu"
	}
	arch := d.Arch()
	if !n.supports(d.props.major, d.props.minor) {
		return nil, &CompileError{Program: p.Name, Exprs: p.Exprs, Arch: arch,
			Err: fmt.Errorf("NVRTC %s cannot target compute capability %d.%d (it supports %v); install a newer NVRTC or set %s", n.version(), d.props.major, d.props.minor, n.archs, EnvNVRTC)}
	}
	opts := n.compileOptions(arch, p.Options)
	key := makeCacheKey(p, opts, n.version(), arch)

	d.modMu.Lock()
	if e, ok := d.modules[key]; ok {
		d.modMu.Unlock()
		select {
		case <-e.done:
			return e.mod, e.err
		default:
		}
		if !d.own.onOwner() {
			<-e.done
			return e.mod, e.err
		}
		// On the owner thread, never wait for another goroutine's build: it
		// needs this thread to load its module. Build a private copy.
		m, err := d.buildModule(n, p, arch, opts)
		if err == nil {
			d.modMu.Lock()
			d.extraModules = append(d.extraModules, m)
			d.modMu.Unlock()
		}
		return m, err
	}
	e := &moduleEntry{done: make(chan struct{})}
	d.modules[key] = e
	d.modMu.Unlock()

	e.mod, e.err = d.buildModule(n, p, arch, opts)
	if e.err != nil {
		// Forget failures so a later call can retry (e.g. after freeing memory).
		d.modMu.Lock()
		if d.modules[key] == e {
			delete(d.modules, key)
		}
		d.modMu.Unlock()
	}
	close(e.done)
	return e.mod, e.err
}

func (d *Device) buildModule(n *nvrtcLib, p Program, arch string, opts []string) (*Module, error) {
	dir, derr := cacheDir()
	if derr != nil {
		dir = "" // no cache location (no $HOME): compile every time
	}
	kc := &kernelCache{dir: dir, version: n.version(), compile: n.compile}
	c, hit, err := kc.get(p, arch, opts)
	if err != nil {
		return nil, err
	}
	h, err := d.loadCUBIN(c.cubin)
	if err != nil && hit {
		// A cached CUBIN the driver rejects: rebuild it once, overwriting it.
		if c, err = kc.rebuild(p, arch, opts); err != nil {
			return nil, err
		}
		hit = false
		h, err = d.loadCUBIN(c.cubin)
	}
	if err != nil {
		return nil, fmt.Errorf("load module %s: %w", p.Name, err)
	}
	m := &Module{d: d, h: h, name: p.Name, lowered: map[string]string{}, fromCache: hit, log: c.log, funcs: map[string]Function{},
		dependent: p.GridDependent}
	for i, e := range c.exprs {
		m.lowered[e] = c.lowered[i]
	}
	return m, nil
}

// loadCUBIN loads a CUBIN image on the owner thread.
func (d *Device) loadCUBIN(cubin []byte) (uintptr, error) {
	var h uintptr
	err := d.Do(func(c *Ctx) error {
		drv := d.drv
		r, _, _ := purego.SyscallN(drv.cuModuleLoadData, uintptr(unsafe.Pointer(&h)), uintptr(unsafe.Pointer(&cubin[0])))
		return drv.check("cuModuleLoadData", int32(r))
	})
	return h, err
}

// Name returns the program's name.
func (m *Module) Name() string { return m.name }

// FromCache reports whether the CUBIN came from the disk cache.
func (m *Module) FromCache() bool { return m.fromCache }

// Log returns NVRTC's log (warnings) of a fresh compilation; it is empty
// when the CUBIN came from the cache.
func (m *Module) Log() string { return m.log }

// LoweredName returns the mangled name NVRTC gave a name expression.
func (m *Module) LoweredName(expr string) (string, bool) {
	l, ok := m.lowered[expr]
	return l, ok
}

// Function looks up a kernel by its name expression (as listed in
// Program.Exprs) or, for extern "C" kernels, its plain name. Lookups are
// cached.
func (m *Module) Function(name string) (Function, error) {
	m.mu.Lock()
	f, ok := m.funcs[name]
	m.mu.Unlock()
	if ok {
		return f, nil
	}
	err := m.d.Do(func(c *Ctx) error {
		var err error
		f, err = c.Function(m, name)
		return err
	})
	return f, err
}

// Function is [Module.Function] on the owner thread.
func (c *Ctx) Function(m *Module, name string) (Function, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if f, ok := m.funcs[name]; ok {
		return f, nil
	}
	if m.h == 0 {
		return Function{}, fmt.Errorf("cuda: module %s: %w", m.name, ErrClosed)
	}
	sym := name
	if l, ok := m.lowered[name]; ok {
		sym = l
	}
	csym := cstring(sym)
	drv := c.d.drv
	var h uintptr
	r, _, _ := purego.SyscallN(drv.cuModuleGetFunction, uintptr(unsafe.Pointer(&h)), m.h, uintptr(unsafe.Pointer(&csym[0])))
	if int32(r) != cudaSuccess {
		e := drv.newError("cuModuleGetFunction", int32(r))
		e.Kernel = name
		if int32(r) == cudaErrNotFound && len(m.lowered) > 0 {
			exprs := make([]string, 0, len(m.lowered))
			for k := range m.lowered {
				exprs = append(exprs, k)
			}
			return Function{}, fmt.Errorf("module %s has no kernel %q (name expressions: %s): %w", m.name, name, strings.Join(exprs, ", "), e)
		}
		return Function{}, fmt.Errorf("module %s: %w", m.name, e)
	}
	f := Function{h: h, name: name, dependent: m.dependent}
	m.funcs[name] = f
	return f, nil
}
