package cuda

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// DType is an element type of GEMM operands.
type DType int

// Element types. Values are this package's own; the cudaDataType_t of
// each is given by cudaType.
const (
	F32  DType = iota // float
	F16               // IEEE half
	BF16              // bfloat16
)

// String returns "f32", "f16" or "bf16".
func (t DType) String() string {
	switch t {
	case F32:
		return "f32"
	case F16:
		return "f16"
	case BF16:
		return "bf16"
	}
	return fmt.Sprintf("DType(%d)", int(t))
}

// Size returns the element size in bytes.
func (t DType) Size() int {
	if t == F32 {
		return 4
	}
	return 2
}

// cuBLAS / cuBLASLt constants, values from library_types.h, cublas_api.h and
// cublasLt.h (CUDA 13.0).
const (
	cudaR32F  = 0  // CUDA_R_32F
	cudaR16F  = 2  // CUDA_R_16F
	cudaR16BF = 14 // CUDA_R_16BF

	cublasCompute32F = 68 // CUBLAS_COMPUTE_32F
	cublasOpN        = 0  // CUBLAS_OP_N
	cublasOpT        = 1  // CUBLAS_OP_T

	ltDescTransA = 3 // CUBLASLT_MATMUL_DESC_TRANSA (int32)
	ltDescTransB = 4 // CUBLASLT_MATMUL_DESC_TRANSB (int32)

	ltPrefMaxWorkspaceBytes = 1 // CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES (uint64)
	ltPrefMinAlignABytes    = 5 // CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES (uint32)
	ltPrefMinAlignBBytes    = 6 // ..._B_BYTES
	ltPrefMinAlignCBytes    = 7 // ..._C_BYTES
	ltPrefMinAlignDBytes    = 8 // ..._D_BYTES

	// gemmWorkspaceBytes is the cuBLASLt workspace; NVIDIA recommends
	// 32 MiB on Hopper.
	gemmWorkspaceBytes = 32 << 20
	// gemmMaxAlign is cuBLASLt's default assumed pointer alignment.
	gemmMaxAlign = 256
)

func (t DType) cudaType() (int, error) {
	switch t {
	case F32:
		return cudaR32F, nil
	case F16:
		return cudaR16F, nil
	case BF16:
		return cudaR16BF, nil
	}
	return 0, fmt.Errorf("cuda: unknown DType %d", int(t))
}

// ltAlgo is cublasLtMatmulAlgo_t: struct { uint64_t data[8]; }.
type ltAlgo [8]uint64

// ltHeuristicResult is cublasLtMatmulHeuristicResult_t (96 bytes):
// algo, size_t workspaceSize, cublasStatus_t state, float wavesCount,
// int reserved[4].
type ltHeuristicResult struct {
	algo          ltAlgo
	workspaceSize uint64
	state         int32
	wavesCount    float32
	reserved      [4]int32
}

// cublasLt holds the entry points of cuBLASLt.
type cublasLt struct {
	lib     *library
	version int // cublasLtGetVersion, e.g. 130100 for 13.1.0

	create, destroy, getVersion, getStatusName, getStatusString uintptr
	descCreate, descDestroy, descSetAttribute                   uintptr
	layoutCreate, layoutDestroy                                 uintptr
	prefCreate, prefDestroy, prefSetAttribute                   uintptr
	algoGetHeuristic, matmul                                    uintptr
}

var (
	cublasLtOnce   sync.Once
	cublasLtLoaded *cublasLt
	cublasLtErr    error
)

// loadCUBLASLt opens cuBLASLt once per process. Failures wrap ErrNoCUBLASLt.
func loadCUBLASLt() (*cublasLt, error) {
	cublasLtOnce.Do(func() {
		cublasLtLoaded, cublasLtErr = openCUBLASLt(currentConfig(libCUBLASLt), dlopenNow)
	})
	return cublasLtLoaded, cublasLtErr
}

func openCUBLASLt(c Config, open opener) (*cublasLt, error) {
	lib, err := openLibrary(specCUBLASLt, c, open)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoCUBLASLt, err)
	}
	s := &symbols{lib: lib}
	l := &cublasLt{lib: lib}
	l.create = s.need("cublasLtCreate")
	l.destroy = s.need("cublasLtDestroy")
	l.getVersion = s.need("cublasLtGetVersion")
	l.getStatusName = s.optional("cublasLtGetStatusName")
	l.getStatusString = s.optional("cublasLtGetStatusString")
	l.descCreate = s.need("cublasLtMatmulDescCreate")
	l.descDestroy = s.need("cublasLtMatmulDescDestroy")
	l.descSetAttribute = s.need("cublasLtMatmulDescSetAttribute")
	l.layoutCreate = s.need("cublasLtMatrixLayoutCreate")
	l.layoutDestroy = s.need("cublasLtMatrixLayoutDestroy")
	l.prefCreate = s.need("cublasLtMatmulPreferenceCreate")
	l.prefDestroy = s.need("cublasLtMatmulPreferenceDestroy")
	l.prefSetAttribute = s.need("cublasLtMatmulPreferenceSetAttribute")
	l.algoGetHeuristic = s.need("cublasLtMatmulAlgoGetHeuristic")
	l.matmul = s.need("cublasLtMatmul")
	if s.err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoCUBLASLt, s.err)
	}
	v, _, _ := purego.SyscallN(l.getVersion)
	l.version = int(v)
	return l, nil
}

// versionString formats cublasLtGetVersion's major*10000+minor*100+patch.
func (l *cublasLt) versionString() string {
	return fmt.Sprintf("%d.%d.%d", l.version/10000, l.version/100%100, l.version%100)
}

// check turns a cublasStatus_t into nil or an *Error.
func (l *cublasLt) check(call string, r uintptr) error {
	code := int32(r)
	if code == 0 {
		return nil
	}
	e := &Error{Call: call, Code: int(code), Name: cublasStatusName(int(code))}
	if l.getStatusName != 0 {
		p, _, _ := purego.SyscallN(l.getStatusName, uintptr(code))
		if s := goString(p); s != "" {
			e.Name = s
		}
	}
	if l.getStatusString != 0 {
		p, _, _ := purego.SyscallN(l.getStatusString, uintptr(code))
		e.Msg = goString(p)
	}
	return e
}

// GEMMShape describes Y[M,N] = X[M,K] · W[N,K]ᵀ, the linear-layer product,
// on row-major matrices: X holds M rows of K inputs, W holds N rows of K
// weights (the PyTorch nn.Linear layout), Y holds M rows of N outputs. In
// and Out are F16 or BF16 for X and W, and F16, BF16 or F32 for Y; the
// accumulation is fp32.
type GEMMShape struct {
	M, N, K int
	In, Out DType
}

func (g GEMMShape) validate() error {
	if g.M <= 0 || g.N <= 0 || g.K <= 0 {
		return fmt.Errorf("cuda: GEMM shape M=%d N=%d K=%d: dimensions must be positive", g.M, g.N, g.K)
	}
	if g.In != F16 && g.In != BF16 {
		return fmt.Errorf("cuda: GEMM input type %v: want f16 or bf16", g.In)
	}
	if g.Out != F16 && g.Out != BF16 && g.Out != F32 {
		return fmt.Errorf("cuda: GEMM output type %v: want f16, bf16 or f32", g.Out)
	}
	if g.Out != F32 && g.Out != g.In {
		return fmt.Errorf("cuda: GEMM %v inputs with %v output: the output must be the input type or f32", g.In, g.Out)
	}
	return nil
}

// ltLayout is the column-major problem cuBLASLt is given for a row-major
// linear layer. A row-major R×C matrix is, read column-major, its C×R
// transpose with leading dimension C. So
//
//	Yᵀ (N×M, ld N) = op(A) · op(B) with
//	A = W read column-major: K×N, ld K, op = T  (gives W, N×K)
//	B = X read column-major: K×M, ld K, op = N  (gives Xᵀ, K×M)
//
// which is cuBLASLt's m=N, n=M, k=K "TN" case, its best-supported layout.
type ltLayout struct {
	transA, transB    int
	aRows, aCols, aLD int
	bRows, bCols, bLD int
	cRows, cCols, cLD int
	m, n, k           int // the column-major problem size
}

// linearLayout maps a row-major linear layer onto cuBLASLt's column-major
// operands.
func linearLayout(g GEMMShape) ltLayout {
	return ltLayout{
		transA: cublasOpT, transB: cublasOpN,
		aRows: g.K, aCols: g.N, aLD: g.K,
		bRows: g.K, bCols: g.M, bLD: g.K,
		cRows: g.N, cCols: g.M, cLD: g.N,
		m: g.N, n: g.M, k: g.K,
	}
}

// gemmKey identifies a cached plan: the shape and the pointer alignment the
// heuristic was asked to assume.
type gemmKey struct {
	shape GEMMShape
	align uint32
}

// gemmPlan holds cuBLASLt descriptors and the heuristic's algorithm for one
// shape, reused by every call with that shape.
type gemmPlan struct {
	desc, a, b, c uintptr
	algo          ltAlgo
	workspace     uint64 // bytes the algorithm needs, at most gemmWorkspaceBytes
}

// blasState is a Ctx's cuBLASLt handle, workspace and plan cache. It is
// touched only on the owner thread.
type blasState struct {
	lt          *cublasLt
	handle      uintptr
	workspace   DevicePtr
	plans       map[gemmKey]*gemmPlan
	alpha, beta float32 // host scalars for cublasLtMatmul (pointer mode host)
}

func (c *Ctx) blasInit() (*blasState, error) {
	if c.blas != nil {
		return c.blas, nil
	}
	lt, err := loadCUBLASLt()
	if err != nil {
		return nil, err
	}
	b := &blasState{lt: lt, plans: map[gemmKey]*gemmPlan{}, alpha: 1, beta: 0}
	r, _, _ := purego.SyscallN(lt.create, uintptr(unsafe.Pointer(&b.handle)))
	if err := lt.check("cublasLtCreate", r); err != nil {
		return nil, err
	}
	if b.workspace, err = c.Alloc(gemmWorkspaceBytes); err != nil {
		purego.SyscallN(lt.destroy, b.handle)
		return nil, fmt.Errorf("cuBLASLt workspace: %w", err)
	}
	c.blas = b
	return b, nil
}

func (c *Ctx) closeBLAS() {
	b := c.blas
	if b == nil {
		return
	}
	for _, p := range b.plans {
		b.destroyPlan(p)
	}
	b.plans = nil
	c.Free(b.workspace)
	purego.SyscallN(b.lt.destroy, b.handle)
	c.blas = nil
}

func (b *blasState) destroyPlan(p *gemmPlan) {
	lt := b.lt
	for _, l := range []uintptr{p.a, p.b, p.c} {
		if l != 0 {
			purego.SyscallN(lt.layoutDestroy, l)
		}
	}
	if p.desc != 0 {
		purego.SyscallN(lt.descDestroy, p.desc)
	}
}

// alignmentOf returns the largest power of two, at most gemmMaxAlign, that
// divides p.
func alignmentOf(p DevicePtr) uint32 {
	a := uint32(gemmMaxAlign)
	for a > 1 && uint64(p)%uint64(a) != 0 {
		a >>= 1
	}
	return a
}

// plan returns the cached plan for key, building it on first use.
func (b *blasState) plan(key gemmKey) (*gemmPlan, error) {
	if p, ok := b.plans[key]; ok {
		return p, nil
	}
	g, lt := key.shape, b.lt
	inType, _ := g.In.cudaType()
	outType, _ := g.Out.cudaType()
	lay := linearLayout(g)
	p := &gemmPlan{}
	fail := func(err error) (*gemmPlan, error) {
		b.destroyPlan(p)
		return nil, fmt.Errorf("GEMM M=%d N=%d K=%d %v->%v: %w", g.M, g.N, g.K, g.In, g.Out, err)
	}
	r, _, _ := purego.SyscallN(lt.descCreate, uintptr(unsafe.Pointer(&p.desc)), cublasCompute32F, cudaR32F)
	if err := lt.check("cublasLtMatmulDescCreate", r); err != nil {
		return fail(err)
	}
	for _, a := range []struct {
		attr int
		val  int32
	}{{ltDescTransA, int32(lay.transA)}, {ltDescTransB, int32(lay.transB)}} {
		v := a.val
		r, _, _ := purego.SyscallN(lt.descSetAttribute, p.desc, uintptr(a.attr), uintptr(unsafe.Pointer(&v)), unsafe.Sizeof(v))
		if err := lt.check("cublasLtMatmulDescSetAttribute", r); err != nil {
			return fail(err)
		}
	}
	for _, l := range []struct {
		dst            *uintptr
		typ            int
		rows, cols, ld int
	}{
		{&p.a, inType, lay.aRows, lay.aCols, lay.aLD},
		{&p.b, inType, lay.bRows, lay.bCols, lay.bLD},
		{&p.c, outType, lay.cRows, lay.cCols, lay.cLD},
	} {
		r, _, _ := purego.SyscallN(lt.layoutCreate, uintptr(unsafe.Pointer(l.dst)), uintptr(l.typ), uintptr(l.rows), uintptr(l.cols), uintptr(l.ld))
		if err := lt.check("cublasLtMatrixLayoutCreate", r); err != nil {
			return fail(err)
		}
	}

	var pref uintptr
	r, _, _ = purego.SyscallN(lt.prefCreate, uintptr(unsafe.Pointer(&pref)))
	if err := lt.check("cublasLtMatmulPreferenceCreate", r); err != nil {
		return fail(err)
	}
	defer purego.SyscallN(lt.prefDestroy, pref)
	ws := uint64(gemmWorkspaceBytes)
	r, _, _ = purego.SyscallN(lt.prefSetAttribute, pref, ltPrefMaxWorkspaceBytes, uintptr(unsafe.Pointer(&ws)), unsafe.Sizeof(ws))
	if err := lt.check("cublasLtMatmulPreferenceSetAttribute", r); err != nil {
		return fail(err)
	}
	if key.align < gemmMaxAlign {
		al := key.align
		for _, attr := range []uintptr{ltPrefMinAlignABytes, ltPrefMinAlignBBytes, ltPrefMinAlignCBytes, ltPrefMinAlignDBytes} {
			r, _, _ := purego.SyscallN(lt.prefSetAttribute, pref, attr, uintptr(unsafe.Pointer(&al)), unsafe.Sizeof(al))
			if err := lt.check("cublasLtMatmulPreferenceSetAttribute", r); err != nil {
				return fail(err)
			}
		}
	}
	var res ltHeuristicResult
	var count int32
	r, _, _ = purego.SyscallN(lt.algoGetHeuristic, b.handle, p.desc, p.a, p.b, p.c, p.c, pref, 1,
		uintptr(unsafe.Pointer(&res)), uintptr(unsafe.Pointer(&count)))
	if err := lt.check("cublasLtMatmulAlgoGetHeuristic", r); err != nil {
		return fail(err)
	}
	if count == 0 {
		return fail(fmt.Errorf("cublasLtMatmulAlgoGetHeuristic found no algorithm (pointer alignment %d bytes)", key.align))
	}
	if err := lt.check("cublasLtMatmulAlgoGetHeuristic result", uintptr(res.state)); err != nil {
		return fail(err)
	}
	p.algo, p.workspace = res.algo, res.workspaceSize
	b.plans[key] = p
	return p, nil
}

// GEMM queues Y = X · Wᵀ on s (see [GEMMShape] for the layout); x, w and y
// are device addresses of row-major matrices. The first call for a shape
// asks cuBLASLt's heuristic for an algorithm and caches it, with its
// descriptors, for later calls; pointers less than 256-byte aligned get a
// plan of their own. The call can be captured into a graph once a call of
// the same shape and pointer alignment has run outside a capture: that
// first call allocates the Ctx's workspace (gemmWorkspaceBytes, fixed for
// the Ctx's life) and runs the heuristic, neither of which belongs in a
// capture. A captured call then depends only on y, x, w and the shape (the
// plan is cached for the Ctx's life), so equal arguments replay with the
// direct call's bits (TestGPUGEMMGraphReplay).
func (c *Ctx) GEMM(s Stream, g GEMMShape, y, x, w DevicePtr) error {
	if err := g.validate(); err != nil {
		return err
	}
	b, err := c.blasInit()
	if err != nil {
		return err
	}
	align := min(alignmentOf(x), alignmentOf(w), alignmentOf(y))
	p, err := b.plan(gemmKey{shape: g, align: align})
	if err != nil {
		return err
	}
	lt := b.lt
	// alpha and beta are fields of the heap-allocated blasState, so the
	// pointers passed stay valid through the call.
	r, _, _ := purego.SyscallN(lt.matmul, b.handle, p.desc,
		uintptr(unsafe.Pointer(&b.alpha)),
		uintptr(w), p.a,
		uintptr(x), p.b,
		uintptr(unsafe.Pointer(&b.beta)),
		uintptr(y), p.c,
		uintptr(y), p.c,
		uintptr(unsafe.Pointer(&p.algo)),
		uintptr(b.workspace), gemmWorkspaceBytes,
		uintptr(s))
	if err := lt.check("cublasLtMatmul", r); err != nil {
		return fmt.Errorf("GEMM M=%d N=%d K=%d %v->%v: %w", g.M, g.N, g.K, g.In, g.Out, err)
	}
	return nil
}

// GEMM runs Y = X · Wᵀ on the Device; see [Ctx.GEMM].
func (d *Device) GEMM(s Stream, g GEMMShape, y, x, w DevicePtr) error {
	return d.Do(func(c *Ctx) error { return c.GEMM(s, g, y, x, w) })
}

// CUBLASLtVersion loads cuBLASLt (once) and returns its version, e.g.
// "13.1.0". The error wraps ErrNoCUBLASLt.
func CUBLASLtVersion() (string, error) {
	lt, err := loadCUBLASLt()
	if err != nil {
		return "", err
	}
	return lt.versionString(), nil
}
