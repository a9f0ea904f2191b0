package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/kv"
)

var inspectCmd = &command{
	name:    "inspect",
	usage:   "kv [--head-dim D] SPEC... | gpu",
	summary: "explain KV formats (layout, bits per element, memory) or the GPU runtime",
	help: `'inspect kv' prints, for each format spec, the packed layout of a block, the
bits per cached element with scales and zeros included, the memory per
token, and which GPU decode kernel reads it; with no spec it prints the spec
grammar.

'inspect gpu' prints the device, driver, NVRTC and cuBLASLt versions and the
kernel cache (not built yet).

` + kv.SpecGrammar + `

example:
  bitdecode inspect kv int4 k4v2 int2:kc32:v32`,
}

func init() {
	flagSets["inspect"] = func() *flag.FlagSet {
		fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
		fs.Int("head-dim", 128, "head dimension D the formats are resolved for (64, 128 or 256)")
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
		d := fs.Int("head-dim", 128, "head dimension D the formats are resolved for (64, 128 or 256)")
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
			f, err := sp.Resolve(*d)
			if err != nil {
				return usageErrorf("%v", err)
			}
			if i > 0 {
				fmt.Fprintln(stdout)
			}
			f.Describe(stdout)
			fmt.Fprintf(stdout, "gpu        %s\n", kernels.DescribeDecode(f))
		}
		return nil
	case "gpu":
		return inspectGPU(stdout, stderr)
	}
	return usageErrorf("unknown inspect target %q: want kv or gpu", args[0])
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
