package main

import (
	"fmt"
	"io"
)

// resolveDevice turns --device into "cpu" or "cuda". auto falls back to the
// CPU with one line saying why; cuda fails clearly when no GPU is usable.
func resolveDevice(want string, stderr io.Writer) (string, error) {
	switch want {
	case "cpu":
		return "cpu", nil
	case "auto", "cuda":
		err := gpuAvailable()
		if err == nil {
			return "cuda", nil
		}
		if want == "auto" {
			fmt.Fprintf(stderr, "bitdecode: no usable GPU (%v); running on the CPU\n", err)
			return "cpu", nil
		}
		return "", fmt.Errorf("--device cuda: %w (try --device cpu)", err)
	}
	return "", usageErrorf("--device %q: want auto, cpu or cuda", want)
}

// gpuAvailable reports why the CUDA backend cannot run here (nil if it can).
func gpuAvailable() error {
	return fmt.Errorf("the CUDA backend is not built yet")
}

func inspectGPU(stdout, stderr io.Writer) error {
	return fmt.Errorf("%w: 'inspect gpu' arrives with the GPU runtime (issue #3)", errNotYet)
}
