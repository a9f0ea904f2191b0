package gpu_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/bitdecode/bitdecode/backend/gpu"
	"github.com/bitdecode/bitdecode/gpu/cuda"
)

// options are the backend options the GPU tests open with: the test binary
// is a program's edge, so BITDECODE_* variables set for it apply, as they do
// to bitdecode.
var options gpu.Options

func TestMain(m *testing.M) {
	var err error
	if options, err = gpu.ParseOptions(os.LookupEnv); err == nil {
		err = cuda.Configure(*options.CUDA) // before any test loads a library
	}
	if err != nil {
		fmt.Println("backend/gpu:", err)
		os.Exit(2)
	}
	os.Exit(m.Run())
}
