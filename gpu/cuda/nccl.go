// nccl.go: NCCL (libnccl.so.2) through purego, for tensor parallelism: one
// communicator per GPU of a group, initialized on each GPU's owner thread,
// and the in-place float32 sum (ncclAllReduce) queued on a stream like a
// kernel, so that CUDA graphs capture it. NVLink multicast (NVLS) is kept
// off: before the library is opened, libc's environment gets
// NCCL_NVLS_ENABLE=0 whatever the user set (see setNCCLEnv).

package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// ErrNoNCCL means the NCCL library could not be loaded, so GPUs cannot form
// a tensor-parallel group. Its text says what to install or set.
var ErrNoNCCL = errors.New("cuda: no NCCL")

// NCCL constants, values from nccl.h (NCCL 2.x).
const (
	ncclSuccess     = 0 // ncclSuccess
	ncclInProgress  = 7 // ncclInProgress: a nonblocking call still running
	ncclFloat32     = 7 // ncclDataType_t ncclFloat32
	ncclSum         = 0 // ncclRedOp_t ncclSum
	ncclUniqueIDLen = 128
	// cuStreamQuery's result while work is queued (CUDA_ERROR_NOT_READY).
	cudaErrNotReady = 600
)

// ncclResultNames maps ncclResult_t to its name (nccl.h).
var ncclResultNames = []string{
	"ncclSuccess", "ncclUnhandledCudaError", "ncclSystemError", "ncclInternalError",
	"ncclInvalidArgument", "ncclInvalidUsage", "ncclRemoteError", "ncclInProgress", "ncclTimeout",
}

func ncclResultName(code int) string {
	if code >= 0 && code < len(ncclResultNames) {
		return ncclResultNames[code]
	}
	return fmt.Sprintf("ncclResult_%d", code)
}

// ncclEnv is what setNCCLEnv writes into libc's environment before NCCL
// loads. NCCL reads its settings with getenv, which Go's os.Setenv does not
// reach in a program built without cgo, so the values go through libc's
// setenv.
var ncclEnv = []struct {
	name, value string
	force       bool // overwrite the user's value
}{
	// NVLink multicast (NVLS) off, always: on the shared multi-GPU
	// machines a program that uses it can put the host's GPUs out of
	// service, and bitdecode's all-reduces (KiB to MiB) gain nothing.
	{"NCCL_NVLS_ENABLE", "0", true},
	// Connect every algorithm's channels when the communicator is made,
	// not at the first collective that needs them (NCCL's default since
	// 2.22): a later all-reduce of another size then never sets up
	// connections, which wait for the peers, inside a CUDA graph capture.
	// A user's value wins.
	{"NCCL_RUNTIME_CONNECT", "0", false},
}

// nccl holds the entry points of libnccl.
type nccl struct {
	lib     *library
	version int // ncclGetVersion, e.g. 22805 for 2.28.5

	getVersion, getUniqueID, commInitRank, allReduce     uintptr
	groupStart, groupEnd, commGetAsyncError, commAbort   uintptr
	commDestroy, getErrorString, getLastError, streamQry uintptr
}

var (
	ncclOnce   sync.Once
	ncclLoaded *nccl
	ncclErr    error
)

// ncclHint is appended to a failed load: what to install or set.
const ncclHint = "install NCCL for CUDA 13 (pip install nvidia-nccl-cu13, whose nvidia/nccl/lib holds libnccl.so.2, " +
	"or the distribution's libnccl2) and set " + EnvLibNCCL + " to the library's path if it is not on the loader's path"

// loadNCCL sets NCCL's environment in libc (setNCCLEnv), opens NCCL and
// binds its symbols, once per process. Failures wrap ErrNoNCCL.
func loadNCCL() (*nccl, error) {
	ncclOnce.Do(func() {
		if err := setNCCLEnv(); err != nil {
			ncclErr = fmt.Errorf("%w: %v", ErrNoNCCL, err)
			return
		}
		ncclLoaded, ncclErr = openNCCL(currentConfig(libNCCL), dlopenNow)
	})
	return ncclLoaded, ncclErr
}

// setNCCLEnv writes ncclEnv into libc's environment (setenv with
// overwrite), where NCCL reads it, and reads each value back.
func setNCCLEnv() error {
	libc, err := dlopenNow("libc.so.6")
	if err != nil {
		return fmt.Errorf("libc.so.6 (to set NCCL's environment): %v", err)
	}
	setenv, err1 := dlsym(libc, "setenv")
	getenv, err2 := dlsym(libc, "getenv")
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("libc.so.6: %v", err)
	}
	for _, e := range ncclEnv {
		name, value := cstring(e.name), cstring(e.value)
		overwrite := uintptr(0)
		if e.force {
			overwrite = 1
		}
		r, _, _ := purego.SyscallN(setenv, uintptr(unsafe.Pointer(&name[0])), uintptr(unsafe.Pointer(&value[0])), overwrite)
		p, _, _ := purego.SyscallN(getenv, uintptr(unsafe.Pointer(&name[0])))
		runtime.KeepAlive(name)
		runtime.KeepAlive(value)
		if int32(r) != 0 || (e.force && goString(p) != e.value) {
			return fmt.Errorf("setenv(%s=%s) in libc failed (reads back %q)", e.name, e.value, goString(p))
		}
	}
	return nil
}

// cgetenv returns name's value in libc's environment ("" when unset), for
// tests that check what NCCL sees.
func cgetenv(name string) string {
	libc, err := dlopenNow("libc.so.6")
	if err != nil {
		return ""
	}
	getenv, err := dlsym(libc, "getenv")
	if err != nil {
		return ""
	}
	b := cstring(name)
	p, _, _ := purego.SyscallN(getenv, uintptr(unsafe.Pointer(&b[0])))
	runtime.KeepAlive(b)
	return goString(p)
}

func openNCCL(c Config, open opener) (*nccl, error) {
	lib, err := openLibrary(specNCCL, c, open)
	if err != nil {
		return nil, fmt.Errorf("%w: %v; %s", ErrNoNCCL, err, ncclHint)
	}
	s := &symbols{lib: lib}
	n := &nccl{lib: lib}
	n.getVersion = s.need("ncclGetVersion")
	n.getUniqueID = s.need("ncclGetUniqueId")
	n.commInitRank = s.need("ncclCommInitRank")
	n.allReduce = s.need("ncclAllReduce")
	n.groupStart = s.need("ncclGroupStart")
	n.groupEnd = s.need("ncclGroupEnd")
	n.commGetAsyncError = s.need("ncclCommGetAsyncError")
	n.commAbort = s.need("ncclCommAbort")
	n.commDestroy = s.need("ncclCommDestroy")
	n.getErrorString = s.need("ncclGetErrorString")
	n.getLastError = s.optional("ncclGetLastError")
	if s.err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoNCCL, s.err)
	}
	var v int32
	r, _, _ := purego.SyscallN(n.getVersion, uintptr(unsafe.Pointer(&v)))
	if err := n.check("ncclGetVersion", 0, r); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoNCCL, err)
	}
	n.version = int(v)
	return n, nil
}

// check turns an ncclResult_t into nil or an *Error; comm, when not 0,
// adds NCCL's last error message of that communicator.
func (n *nccl) check(call string, comm uintptr, r uintptr) error {
	code := int(int32(r))
	if code == ncclSuccess {
		return nil
	}
	e := &Error{Call: call, Code: code, Name: ncclResultName(code)}
	p, _, _ := purego.SyscallN(n.getErrorString, uintptr(code))
	e.Msg = goString(p)
	if n.getLastError != 0 {
		p, _, _ = purego.SyscallN(n.getLastError, comm)
		if last := strings.TrimSpace(goString(p)); last != "" {
			e.Msg += ": " + last
		}
	}
	return e
}

// NCCLVersion loads NCCL and returns its version as "2.28.5". The error
// wraps ErrNoNCCL and says what to install or set.
func NCCLVersion() (string, error) {
	n, err := loadNCCL()
	if err != nil {
		return "", err
	}
	v := n.version
	if v < 10000 { // NCCL_VERSION before 2.9: X*1000 + Y*100 + Z
		return fmt.Sprintf("%d.%d.%d", v/1000, v/100%10, v%100), nil
	}
	return fmt.Sprintf("%d.%d.%d", v/10000, v/100%100, v%100), nil
}

// NCCLUniqueID is the id that ties the ranks of one communicator together
// (ncclUniqueId): made once by NewNCCLUniqueID, handed to every rank.
type NCCLUniqueID struct{ internal [ncclUniqueIDLen]byte }

// NewNCCLUniqueID returns a fresh id (ncclGetUniqueId).
func NewNCCLUniqueID() (NCCLUniqueID, error) {
	var id NCCLUniqueID
	n, err := loadNCCL()
	if err != nil {
		return id, err
	}
	r, _, _ := purego.SyscallN(n.getUniqueID, uintptr(unsafe.Pointer(&id.internal[0])))
	return id, n.check("ncclGetUniqueId", 0, r)
}

// Comm is one rank's NCCL communicator, bound to the Device it was made on.
type Comm struct {
	n           *nccl
	h           uintptr // ncclComm_t
	rank, ranks int
	dev         *Device
	mu          sync.Mutex
	gone        bool // aborted or destroyed
}

// Rank returns the communicator's rank.
func (m *Comm) Rank() int { return m.rank }

// Ranks returns the number of ranks.
func (m *Comm) Ranks() int { return m.ranks }

// Handle returns the ncclComm_t, for graph keys: it identifies the
// communicator while it lives.
func (m *Comm) Handle() uintptr { return m.h }

// NCCLInit makes this device rank of ranks in the communicator of id
// (ncclCommInitRank) with the device's primary context current. It returns
// when every rank has called it: call it on every rank's owner thread at
// once (one goroutine a rank), never for two ranks from one thread.
func (c *Ctx) NCCLInit(id NCCLUniqueID, ranks, rank int) (*Comm, error) {
	if ranks < 1 || rank < 0 || rank >= ranks {
		return nil, fmt.Errorf("cuda: NCCL rank %d of %d ranks", rank, ranks)
	}
	n, err := loadNCCL()
	if err != nil {
		return nil, err
	}
	var h uintptr
	// ncclCommInitRank(ncclComm_t*, int nranks, ncclUniqueId id, int rank):
	// the 128-byte id is passed by value, which purego lays out per the
	// platform's C ABI.
	var initRank func(comm *uintptr, nranks int32, id NCCLUniqueID, rank int32) int32
	purego.RegisterFunc(&initRank, n.commInitRank)
	r := initRank(&h, int32(ranks), id, int32(rank))
	c.restoreContext()
	if err := n.check("ncclCommInitRank", 0, uintptr(uint32(r))); err != nil {
		return nil, fmt.Errorf("cuda: device %d, rank %d of %d: %w", c.d.ordinal, rank, ranks, err)
	}
	return &Comm{n: n, h: h, rank: rank, ranks: ranks, dev: c.d}, nil
}

// AllReduceSumF32 queues on s the in-place sum over every rank of count
// float32 values at p (ncclAllReduce(p, p, count, ncclFloat32, ncclSum)).
// The GPU waits for every rank's call; the host does not. A stream being
// captured records it into the graph.
func (c *Ctx) AllReduceSumF32(m *Comm, p DevicePtr, count int, s Stream) error {
	if m == nil || m.dev != c.d {
		return errors.New("cuda: AllReduceSumF32: communicator of another device")
	}
	if count < 0 {
		return fmt.Errorf("cuda: AllReduceSumF32 of %d values", count)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gone {
		return fmt.Errorf("cuda: ncclAllReduce: rank %d's communicator was aborted or destroyed", m.rank)
	}
	r, _, _ := purego.SyscallN(m.n.allReduce, uintptr(p), uintptr(p), uintptr(count), ncclFloat32, ncclSum, m.h, uintptr(s))
	return m.n.check("ncclAllReduce", m.h, r)
}

// AsyncError returns the communicator's asynchronous error
// (ncclCommGetAsyncError), nil while it is healthy or still in progress.
// Any goroutine may call it.
func (m *Comm) AsyncError() error {
	if !m.mu.TryLock() { // an abort or destroy is under way
		return nil
	}
	defer m.mu.Unlock()
	if m.gone {
		return nil
	}
	var res int32
	r, _, _ := purego.SyscallN(m.n.commGetAsyncError, m.h, uintptr(unsafe.Pointer(&res)))
	if err := m.n.check("ncclCommGetAsyncError", m.h, r); err != nil {
		return err
	}
	if res == ncclInProgress {
		return nil
	}
	return m.n.check("ncclCommGetAsyncError (asynchronous error)", m.h, uintptr(uint32(res)))
}

// Abort aborts the communicator's operations, including kernels waiting for
// a peer, and frees it (ncclCommAbort). It runs on a thread of its own
// (NCCL makes the communicator's device current there), so it may be called
// while the device's owner thread waits for the stream. Calling it again,
// or after NCCLDestroy, does nothing.
func (m *Comm) Abort() error {
	if !m.retire() {
		return nil
	}
	done := make(chan error, 1)
	go func() {
		// Never unlocked: the thread, whose current device NCCL may have
		// changed, ends with the goroutine.
		runtime.LockOSThread()
		r, _, _ := purego.SyscallN(m.n.commAbort, m.h)
		done <- m.n.check("ncclCommAbort", 0, r)
	}()
	return <-done
}

// retire marks the communicator gone, after any call on it under way, and
// reports whether it was live (the caller then frees it).
func (m *Comm) retire() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	live := !m.gone
	m.gone = true
	return live
}

// NCCLDestroy frees the communicator after its queued operations
// (ncclCommDestroy). Call it on the device's owner thread, once no stream
// will run its operations again.
func (c *Ctx) NCCLDestroy(m *Comm) error {
	if !m.retire() {
		return nil
	}
	r, _, _ := purego.SyscallN(m.n.commDestroy, m.h)
	c.restoreContext()
	return m.n.check("ncclCommDestroy", 0, r)
}

// restoreContext makes the device's primary context current again on the
// owner thread, in case NCCL's runtime calls (cudaSetDevice) changed it.
func (c *Ctx) restoreContext() {
	drv := c.d.drv
	drv.call(drv.cuCtxSetCurrent, c.d.pctx)
}

var (
	streamQueryOnce sync.Once
	streamQuery     uintptr
	streamQueryErr  error
)

// StreamDone reports whether all work queued on s has completed
// (cuStreamQuery), without waiting: code that must not block forever on a
// stream (one that waits for another GPU) polls it with a deadline.
func (c *Ctx) StreamDone(s Stream) (bool, error) {
	drv := c.d.drv
	streamQueryOnce.Do(func() {
		sym := &symbols{lib: drv.lib}
		streamQuery = sym.need("cuStreamQuery")
		streamQueryErr = sym.err
	})
	if streamQueryErr != nil {
		return false, streamQueryErr
	}
	r := drv.call(streamQuery, uintptr(s))
	if r == cudaErrNotReady {
		return false, nil
	}
	return r == cudaSuccess, drv.check("cuStreamQuery", r)
}
