package main

import (
	"fmt"
	"io"

	"github.com/bitdecode/bitdecode/bench"
	"github.com/bitdecode/bitdecode/gpu/cuda"
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
	n, err := cuda.DeviceCount()
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("the CUDA driver reports no devices")
	}
	return nil
}

func inspectGPU(stdout, stderr io.Writer) error {
	if err := gpuAvailable(); err != nil {
		return fmt.Errorf("%w (bitdecode runs on the CPU without one: --device cpu)", err)
	}
	fmt.Fprintln(stderr, "probing device 0 (bandwidth probe streams 1 GiB)...")
	in, err := cuda.Inspect(0, true)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "device        %s (%s, compute %d.%d), %d SMs\n", in.Name, in.Arch, in.ComputeMajor, in.ComputeMinor, in.SMs)
	fmt.Fprintf(stdout, "memory        %.1f GiB total, %.1f GiB free; L2 %.0f MB; smem/block %d KiB\n",
		float64(in.MemTotalBytes)/(1<<30), float64(in.MemFreeBytes)/(1<<30), float64(in.L2Bytes)/1e6, in.SharedPerBlockOptinBytes/1024)
	fmt.Fprintf(stdout, "driver        CUDA %s\n", in.DriverVersion)
	fmt.Fprintf(stdout, "nvrtc         %s %s%s\n", in.NVRTCVersion, in.NVRTCLibrary, errSuffix(in.NVRTCError))
	fmt.Fprintf(stdout, "cuda headers  %s\n", orNone(in.IncludeDir))
	fmt.Fprintf(stdout, "cublasLt      %s%s\n", in.CUBLASLtVersion, errSuffix(in.CUBLASLtError))
	if in.Bandwidth != nil {
		fmt.Fprintf(stdout, "read b/w      %.0f GB/s measured (%.0f GB/s theoretical)\n", in.Bandwidth.GBps, in.PeakGBps())
	} else {
		fmt.Fprintf(stdout, "read b/w      not measured%s\n", errSuffix(in.BandwidthError))
	}
	fmt.Fprintf(stdout, "kernel cache  %s: %d entries, %.1f MiB%s\n", in.Cache.Dir, in.Cache.Entries, float64(in.Cache.Bytes)/(1<<20), errSuffix(in.CacheError))
	return nil
}

func errSuffix(e string) string {
	if e == "" {
		return ""
	}
	return " (error: " + e + ")"
}

func orNone(s string) string {
	if s == "" {
		return "not found"
	}
	return s
}

// benchGPU runs the GPU attention benchmark and prints/writes its table.
func benchGPU(cfg bench.GPUConfig, anchor, jsonPath string, stdout, stderr io.Writer) error {
	dev, err := cuda.Open(0)
	if err != nil {
		return err
	}
	defer dev.Close()
	rep, err := bench.RunAttnGPU(dev, cfg)
	if err != nil {
		return err
	}
	if anchor != "" {
		if err := rep.AttachSDPA(anchor); err != nil {
			return err
		}
	}
	return writeReport(stdout, stderr, rep, jsonPath)
}
