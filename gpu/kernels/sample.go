// sample.go: the wrapper of sample.cu, greedy decoding's next token picked
// on the device (docs/perf/decode-step.md v23).

package kernels

import (
	_ "embed"
	"fmt"

	"github.com/bitdecode/bitdecode/gpu/cuda"
)

//go:embed sample.cu
var sampleSource string

// argmaxThreads is sample.cu's kArgmaxThreads: argmax_rows's block size.
const argmaxThreads = 1024

// Sample holds the compiled kernels of sample.cu.
type Sample struct {
	argmax cuda.Function
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
