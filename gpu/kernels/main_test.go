package kernels_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
)

// tuning is the planners' tuning the GPU tests plan with: the test binary is
// a program's edge, so BITDECODE_* variables set for it (a sweep's knob,
// BITDECODE_CACHE_DIR, BITDECODE_NVRTC) apply, as they do to bitdecode.
var tuning kernels.Tuning

func TestMain(m *testing.M) {
	var err error
	if tuning, err = kernels.ParseTuning(os.LookupEnv); err != nil {
		fmt.Println("gpu/kernels:", err)
		os.Exit(2)
	}
	cfg, err := cuda.ParseConfig(os.LookupEnv)
	if err == nil {
		err = cuda.Configure(cfg)
	}
	if err != nil {
		fmt.Println("gpu/kernels:", err)
		os.Exit(2)
	}
	if tuning != (kernels.Tuning{}) {
		fmt.Printf("gpu/kernels: planning with the tuning of the environment: %+v\n", tuning)
	}
	os.Exit(m.Run())
}
