package cuda_test

import (
	"errors"
	"fmt"
	"log"

	"github.com/bitdecode/bitdecode/gpu/cuda"
)

// Compile a template kernel, instantiate it through a name expression and
// launch it inside one Do, so every call runs on the owner thread without a
// hand-off.
func Example() {
	dev, err := cuda.Open(0)
	if errors.Is(err, cuda.ErrNoDriver) || errors.Is(err, cuda.ErrNoDevice) {
		fmt.Println("falling back to CPU:", err)
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()

	mod, err := dev.Compile(cuda.Program{
		Name: "scale.cu",
		Source: `template <typename T>
__global__ void scale(T* y, T a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] *= a;
}`,
		Exprs: []string{"scale<float>"},
	})
	if err != nil {
		log.Fatal(err) // a *cuda.CompileError carries NVRTC's log
	}
	scale, err := mod.Function("scale<float>")
	if err != nil {
		log.Fatal(err)
	}
	y := []float32{1, 2, 3}
	err = dev.Do(func(c *cuda.Ctx) error {
		p, err := c.Alloc(4 * len(y))
		if err != nil {
			return err
		}
		defer c.Free(p)
		if err := c.HtoD(p, cuda.Bytes(y)); err != nil {
			return err
		}
		s := dev.Stream()
		if err := c.Launch(scale, cuda.Dim3{X: 1}, cuda.Dim3{X: 32}, 0, s, p, float32(2), int32(len(y))); err != nil {
			return err
		}
		if err := c.SyncStream(s); err != nil {
			return err
		}
		return c.DtoH(cuda.Bytes(y), p)
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(y)
}

// GEMM in the linear-layer form: Y[M,N] = X[M,K] · W[N,K]ᵀ, row-major fp16
// in, fp32 out.
func ExampleCtx_GEMM() {
	dev, err := cuda.Open(0)
	if err != nil {
		fmt.Println("no GPU:", err)
		return
	}
	defer dev.Close()
	const M, N, K = 4, 4096, 4096
	shape := cuda.GEMMShape{M: M, N: N, K: K, In: cuda.F16, Out: cuda.F32}
	err = dev.Do(func(c *cuda.Ctx) error {
		x, _ := c.Alloc(M * K * 2)
		w, _ := c.Alloc(N * K * 2)
		y, _ := c.Alloc(M * N * 4)
		defer c.Free(x)
		defer c.Free(w)
		defer c.Free(y)
		// ... upload x and w ...
		return c.GEMM(dev.Stream(), shape, y, x, w)
	})
	if err != nil {
		log.Fatal(err)
	}
}
