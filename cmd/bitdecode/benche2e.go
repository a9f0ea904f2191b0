package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/bitdecode/bitdecode/engine"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/model"
)

// e2eQuickTokens is the number of new tokens of 'bench e2e --quick'.
const e2eQuickTokens = 256

type benchE2EFlags struct {
	weightFlags
	modelDir, kvs, prompt, device *string
	tokens, tp                    *int
	quick                         *bool
}

func addBenchE2EFlags(fs *flag.FlagSet) benchE2EFlags {
	return benchE2EFlags{
		weightFlags: addWeightFlags(fs),
		modelDir:    fs.String("model", "", modelHelp+" (default: the embedded model)"),
		kvs:         fs.String("kv", "fp16,int8,int4,int2", "comma-separated KV format specs; the first is the baseline"),
		prompt:      fs.String("prompt", "func main() {", "prompt text"),
		device:      fs.String("device", "cpu", "where the layers run: cpu, cuda, or auto"),
		tp:          addTPFlag(fs),
		tokens:      fs.Int("tokens", 0, "new tokens per format (default: fill the model's context; 256 with --quick)"),
		quick:       fs.Bool("quick", false, "256 new tokens"),
	}
}

func runBenchE2E(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet(benchCmd, stdout)
	f := addBenchE2EFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if _, err := resolveModel(f.modelDir, stderr, false); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("bench e2e takes no arguments, got %q (use --prompt)", fs.Arg(0))
	}
	var specs []kv.Spec
	for _, s := range strings.Split(*f.kvs, ",") {
		if s = strings.TrimSpace(s); s != "" {
			spec, err := parseSpecChecked(s)
			if err != nil {
				return err
			}
			specs = append(specs, spec)
		}
	}
	if len(specs) == 0 {
		return usageErrorf("--kv lists no format")
	}
	if *f.tokens < 0 {
		return usageErrorf("--tokens %d: want a positive count", *f.tokens)
	}
	o, err := openOptions(*f.modelDir, *f.device, *f.tp, f.weightFlags, stderr, false)
	if err != nil {
		return err
	}
	lm, err := engine.Open(*f.modelDir, o)
	if err != nil {
		return err
	}
	defer lm.Close()
	m, tok, name := lm.Model, lm.Tokenizer, lm.Name
	ids := tok.Encode(*f.prompt, true)
	n := *f.tokens
	full := m.Config().MaxPositions
	switch {
	case n > 0:
	case *f.quick:
		n = e2eQuickTokens
	case full > len(ids):
		n = full - len(ids)
	default:
		n = 1024
	}
	if full > 0 && len(ids)+n > full {
		return usageErrorf("--tokens %d: the prompt's %d tokens plus the new ones exceed the model's context of %d", n, len(ids), full)
	}
	if full <= 0 {
		full = len(ids) + n
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	wm := model.WeightMemoryOf(lm.Model)
	fmt.Fprintf(stderr, "bench e2e: %s (weights %s: %s), %d prompt + %d new tokens, greedy, per KV format: %s\n", name, wm.Format, humanBytes(wm.Bytes), len(ids), n, *f.kvs)
	// A short untimed run first, so that the first format's numbers do not
	// include warming up.
	if _, err := lm.CompareFormats(ctx, ids, specs[:1], engine.GenerateOptions{MaxTokens: 8, StopIDs: []int{}}); err != nil {
		return err
	}
	runs, err := lm.CompareFormats(ctx, ids, specs, engine.GenerateOptions{MaxTokens: n, StopIDs: []int{}})
	if err != nil {
		return err
	}
	writeCompareTable(stdout, runs, full)
	return nil
}
