// sample.go: the wrapper of sample.cu, greedy decoding's next token picked
// on the device (docs/perf/decode-step.md v23).

package kernels

import (
	_ "embed"
	"fmt"
	"math"

	"github.com/bitdecode/bitdecode/gpu/cuda"
)

//go:embed sample.cu
var sampleSource string

// argmaxThreads is sample.cu's kArgmaxThreads: argmax_rows's block size.
const argmaxThreads = 1024

// softcapThreads is sample.cu's kSoftcapThreads: softcap_rows' block size.
const softcapThreads = 256

// Sample holds the compiled kernels of sample.cu.
type Sample struct {
	argmax, softcap cuda.Function
}

// LoadSample compiles sample.cu for dev (once per device; later calls reuse
// the module) and looks its kernels up.
func LoadSample(dev *cuda.Device) (*Sample, error) {
	mod, err := dev.Compile(program("sample.cu", sampleSource, nil, nil))
	if err != nil {
		return nil, err
	}
	k := &Sample{}
	if k.argmax, err = mod.Function("argmax_rows"); err != nil {
		return nil, err
	}
	if k.softcap, err = mod.Function("softcap_rows"); err != nil {
		return nil, err
	}
	return k, nil
}

// ArgmaxRows writes to dst [R] int32 the greedy token of each row of src
// [R, V] float32: model.Argmax's index, bit for bit (the first of equal
// values, -0 equal to +0; a NaN never wins, but a NaN at index 0 gives 0).
// One block a row; src's rows are read once.
func (k *Sample) ArgmaxRows(c *cuda.Ctx, s cuda.Stream, dst, src cuda.DevicePtr, R, V int) error {
	if R <= 0 || V <= 0 || R > maxGridX || V > maxGridX {
		return fmt.Errorf("kernels: argmax_rows: bad shape [%d, %d]", R, V)
	}
	vec4 := flagArg(V%4 == 0 && src%16 == 0)
	return c.Launch(k.argmax, cuda.Dim3{X: R}, cuda.Dim3{X: argmaxThreads}, 0, s, dst, src, int32(V), vec4)
}

// SoftcapRows soft-caps the n float32 values at x in place: x -> c·tanh(x/c)
// (the final logit soft-cap, model.Config.FinalSoftcap), as x·(1/c),
// CUDA's tanhf, times c (the host's rows: c·tanh(x/c) in float64). c
// must be a finite cap > 0.
func (k *Sample) SoftcapRows(ctx *cuda.Ctx, s cuda.Stream, x cuda.DevicePtr, n int, c float32) error {
	if n <= 0 || n > math.MaxInt32-softcapThreads || !(c > 0) || math.IsInf(float64(c), 0) {
		return fmt.Errorf("kernels: softcap_rows: %d values, cap %v", n, c)
	}
	grid := (n + softcapThreads - 1) / softcapThreads
	return ctx.Launch(k.softcap, cuda.Dim3{X: grid}, cuda.Dim3{X: softcapThreads}, 0, s, x, int32(n), c, 1/c)
}
