package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/backend/gpu"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/kvcache/gpukv"
)

var inspectCmd = &command{
	name:    "inspect",
	usage:   "kv [--head-dim D] SPEC... | gpu",
	summary: "explain KV formats (layout, bits per element, memory) or the GPU runtime",
	help: `'inspect kv' prints, for each format spec, the packed layout of a block, the
bits per cached element with scales and zeros included, the memory per
token, and which GPU decode kernel reads it; with no spec it prints the spec
grammar. --head-dim (default 128) is the model's head dimension: the CPU
takes every multiple of 16 from 64 to 256; the GPU kernels take 64, 128 and
256, and a model of another head dim runs on the GPU with each head padded
at load to the next of those, which the GPU line shows (bytes included).

'inspect gpu' prints the device, driver, NVRTC and cuBLASLt versions and the
kernel cache (not built yet).

` + kv.SpecGrammar + `

example:
  bitdecode inspect kv int4 k4v2 int2:kc32:v32
  bitdecode inspect kv --head-dim 96 int4`,
}

func init() {
	flagSets["inspect"] = func() *flag.FlagSet {
		fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
		fs.Int("head-dim", 128, "head dimension D the formats are resolved for ("+kv.HeadDimRule+")")
		return fs
	}
	inspectCmd.run = runInspect
	register(inspectCmd)
}

func runInspect(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageErrorf("what to inspect: kv or gpu")
	}
	switch args[0] {
	case "kv":
		fs := newFlagSet(inspectCmd, stdout)
		d := fs.Int("head-dim", 128, "head dimension D the formats are resolved for ("+kv.HeadDimRule+")")
		if err := parseFlags(fs, args[1:]); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			fmt.Fprintln(stdout, kv.SpecGrammar)
			return nil
		}
		for i, s := range fs.Args() {
			sp, err := parseSpecChecked(s)
			if err != nil {
				return err
			}
			given := sp
			sp = sp.WithDefaultRotation(*d) // what a model's cache runs (engine.Model.ResolveSpec)
			f, err := sp.Resolve(*d)
			if err != nil {
				return usageErrorf("%v", err)
			}
			if i > 0 {
				fmt.Fprintln(stdout)
			}
			f.Describe(stdout)
			if sp.Rotate && !given.Rotate {
				fmt.Fprintln(stdout, "           (the default for 4- and 2-bit formats: it measured better on each; ':norot' turns it off)")
			}
			fmt.Fprintf(stdout, "gpu        %s\n", gpuDescribe(given, f))
			for _, lf := range sp.Layers {
				lr := make([]string, len(lf.Layers))
				for i, r := range lf.Layers {
					lr[i] = r.String()
				}
				fmt.Fprintf(stdout, "layers %s  %s (%.2f bits per element)\n", strings.Join(lr, "+"), lf.Spec.String(), kv.MustResolve(lf.Spec.String(), *d).BitsPerElement())
			}
		}
		return nil
	case "gpu":
		return inspectGPU(stdout, stderr)
	}
	return usageErrorf("unknown inspect target %q: want kv or gpu", args[0])
}

// gpuDescribe says how the GPU runs the spec given, resolved as f for the
// CPU: a head dim its kernels lack is padded at load (gpukv.PadHeadDim, model.Config.PadHeads)
// and the cache holds the format at the padded size, so its bytes are
// those of the padded head.
func gpuDescribe(given kv.Spec, f kv.Format) string {
	dp, ok := gpukv.PadHeadDim(f.D)
	if !ok || dp == f.D {
		return gpukv.DescribeDecode(f)
	}
	sp := given.WithDefaultRotation(dp)
	fp, err := sp.Resolve(dp)
	if err != nil {
		return fmt.Sprintf("head dim %d is padded to %d at load; %s does not resolve there: %v", f.D, dp, given, err)
	}
	return fmt.Sprintf("head dim %d is padded to %d at load (zeros; the same logits): %s, %.2f B per token per KV head stored and read (%.2fx the CPU's); %s",
		f.D, dp, sp, fp.BytesPerToken(), fp.BytesPerToken()/f.BytesPerToken(), gpukv.DescribeDecode(fp))
}

// parseSpecChecked parses a format spec; a bad one is a usage error that
// lists the grammar.
func parseSpecChecked(s string) (kv.Spec, error) {
	sp, err := kv.ParseSpec(s)
	if err != nil {
		return sp, usageErrorf("%v\n\n%s", err, indent(kv.SpecGrammar))
	}
	return sp, nil
}

func indent(s string) string { return "  " + strings.ReplaceAll(s, "\n", "\n  ") }

func inspectGPU(stdout, stderr io.Writer) error {
	if err := backend.DeviceAvailable("cuda"); err != nil {
		return fmt.Errorf("%w (bitdecode runs on the CPU without one: --device cpu)", err)
	}
	fmt.Fprintln(stderr, "probing device 0 (bandwidth probe streams 1 GiB)...")
	in, err := gpu.Inspect(0, true)
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
