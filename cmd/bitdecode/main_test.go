package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bitdecode/bitdecode/internal/testmodel"
)

func TestCLI(t *testing.T) {
	tests := []struct {
		args   []string
		code   int
		stdout string // substring expected on stdout
		stderr string // substring expected on stderr
	}{
		{nil, 2, "", "usage: bitdecode <command>"},
		{[]string{"--version"}, 0, "bitdecode ", ""},
		{[]string{"help"}, 0, "commands:", ""},
		{[]string{"help", "bench"}, 0, "usage: bitdecode bench", ""},
		{[]string{"bench", "-h"}, 0, "bench e2e --quick", ""},
		{[]string{"nope"}, 2, "", `unknown command "nope"`},
		{[]string{"run", "--device", "cpu", "--max-tokens", "4", "func main() {"}, 0, "func main() {", "using the embedded model gotiny"},
		{[]string{"run", "--device", "cpu", "--max-tokens", "4", "--compare-fp16=false", "x"}, 0, "x", "KV cache int4"},
		{[]string{"bench", "e2e", "--tokens", "8", "--kv", "fp16,int4"}, 0, "int4:kc128", "bench e2e: gotiny"},
		{[]string{"bench", "e2e", "--kv", "int9"}, 2, "", "invalid format spec"},
		{[]string{"bench", "e2e", "--tokens", "5000"}, 2, "", "exceed the model's context"},
		{[]string{"bench", "e2e", "extra"}, 2, "", "use --prompt"},
		{[]string{"run", "--model", "/nonexistent", "--kv", "int9", "x"}, 2, "", "invalid format spec"},
		{[]string{"run", "--model", "/nonexistent", "--temperature", "-1", "x"}, 2, "", "temperature"},
		{[]string{"run", "--model", "/nonexistent", "--device", "cpu", "x"}, 1, "", "/nonexistent"},
		{[]string{"serve", "--device", "tpu"}, 2, "", "want auto, cpu or cuda"},
		{[]string{"help", "serve"}, 0, "--kv-memory", ""},
		{[]string{"serve", "--model", "/nonexistent", "--kv-memory", "lots"}, 2, "", "not a size"},
		{[]string{"serve", "--model", "/nonexistent", "--kv", "int9"}, 2, "", "invalid format spec"},
		{[]string{"serve", "--model", "/nonexistent", "--device", "cuda"}, 1, "", "try --device cpu"},
		{[]string{"serve", "--model", "/nonexistent", "--device", "cpu"}, 1, "", "/nonexistent"},
		{[]string{"serve", "--model", "/x", "extra"}, 2, "", "unexpected arguments"},
		{[]string{"eval", "ppl"}, 2, "", "--model DIR and --file TEXT are required"},
		{[]string{"eval"}, 2, "", "ppl"},
		{[]string{"inspect"}, 2, "", "kv or gpu"},
		{[]string{"inspect", "kv", "int4"}, 0, "4.250 bits per element", ""},
		{[]string{"inspect", "kv", "--head-dim", "64", "k4v2"}, 0, "head dim 64", ""},
		{[]string{"inspect", "kv", "--head-dim", "96", "int4"}, 0, "head dim 96 is padded to 128 at load (zeros; the same logits): int4:kc128:v128:res128:rot, 136.00 B per token per KV head stored and read (1.32x the CPU's)", ""},
		{[]string{"inspect", "kv", "int3"}, 2, "", "kXvY"},
		{[]string{"inspect", "kv"}, 0, "BASE[:OPTION]", ""},
		{[]string{"inspect", "kv", "bw:h20:m40:l40"}, 0, "reads at the target shares 50.0% of fp16", ""},
		{[]string{"inspect", "kv", "bw:h20:m40"}, 2, "", "want 100%"},
		{[]string{"run", "--device", "cpu", "--max-tokens", "4", "--kv", "bw:m60:l20:w2:s1:r2", "--compare-fp16=false", "x"}, 0, "x", "KV cache bw:h20:m60:l20:w2:s1:r2"},
		{[]string{"bench", "--kv", "int5"}, 2, "", "invalid format spec"},
		{[]string{"bench", "--grid", "1by8"}, 2, "", "grid point"},
		{[]string{"bench", "--device", "tpu"}, 2, "", "want auto, cpu or cuda"},
		{[]string{"bench", "--device", "cuda"}, 1, "", "try --device cpu"},
		{[]string{"bench", "--bogus"}, 2, "", "flag provided but not defined"},
		{[]string{"run", "--model", "/nonexistent", "--weights", "int5", "x"}, 2, "", "invalid weight spec"},
		{[]string{"run", "--model", "/nonexistent", "--dec-k", "8", "x"}, 2, "", "quantized --weights"},
		{[]string{"eval", "ppl", "--model", "m", "--file", "f", "--weights", "int4:awq"}, 2, "", "want rtn, gptq, act or gG"},
		{[]string{"eval", "ppl", "--model", "m", "--file", "f", "--dec-k", "8,x"}, 2, "", "--dec-k"},
		{[]string{"eval", "ppl", "--model", "m", "--file", "f", "--dec-k", "0,tuned:"}, 2, "", "tuned:5%"},
		{[]string{"run", "--model", "/nonexistent", "--weights", "int4", "--dec-k", "tuned:-3%", "x"}, 2, "", "positive percentage"},
		{[]string{"run", "--weights", "int4", "--dec-k", "tuned:5%", "x"}, 2, "", "give --model DIR"},
		{[]string{"help", "tune"}, 0, "--slowdown", ""},
		{[]string{"tune"}, 2, "", "what to tune: dec"},
		{[]string{"tune", "dec"}, 2, "", "--shapes"},
		{[]string{"tune", "dec", "--shapes", "4096by4096"}, 2, "", "NxK"},
		{[]string{"tune", "dec", "--shapes", "llama-3.1-8b", "--slowdown", "5%,x"}, 2, "", "--slowdown"},
		{[]string{"tune", "dec", "--shapes", "llama-3.1-8b", "--device", "cpu"}, 2, "", "run on a GPU"},
		{[]string{"tune", "dec", "--shapes", "llama-3.1-8b", "--weights", "fp16"}, 2, "", "quantized weights"},
		{[]string{"tune", "dec", "--shapes", "llama-3.1-8b", "--residual", "int3"}, 2, "", "--residual"},
		{[]string{"tune", "dec", "--shapes", "llama-3.1-8b", "--model", "m"}, 2, "", "not both"},
		{[]string{"bench", "dec", "--k-chunk", "32,8"}, 2, "", "increasing"},
		{[]string{"bench", "model", "--preset", "/nonexistent"}, 2, "", "neither a preset (llama-3.1-70b, llama-3.1-8b, llama-3.2-1b) nor a checkpoint directory"},
		{[]string{"run", "--tp", "0", "x"}, 2, "", "--tp 0: want the number of GPUs"},
		{[]string{"chat", "--tp", "-2"}, 2, "", "--tp -2: want the number of GPUs"},
		{[]string{"serve", "--model", "/x", "--tp", "0"}, 2, "", "--tp 0: want"},
		{[]string{"bench", "e2e", "--tp", "0"}, 2, "", "--tp 0: want"},
		{[]string{"eval", "ppl", "--model", "m", "--file", "f", "--tp", "0"}, 2, "", "--tp 0: want"},
		{[]string{"eval", "ppl", "--model", "m", "--file", "f", "--tp", "2", "--kv-reference"}, 2, "", "run it with --tp 1"},
		{[]string{"bench", "model", "--tp", "0"}, 2, "", "--tp 0: want"},
		{[]string{"bench", "attn", "--device", "cpu", "--heads", "30", "--kv-heads", "8"}, 2, "", "want query heads a multiple of the KV heads"},
		{[]string{"bench", "attn", "--device", "cpu", "--kv", "int4:rot", "--head-dim", "96"}, 2, "", "--kv int4:rot at --head-dim 96"},
		{[]string{"help", "bench"}, 0, "--kv-heads and --head-dim time another shape", ""},
		{[]string{"bench", "attn", "--device", "cpu", "--simd", "sse"}, 2, "", "unknown SIMD level"},
		{[]string{"bench", "model", "--preset", "llama-3.1-8b", "--tp", "3"}, 2, "", "32 query heads"},
		{[]string{"help", "run"}, 0, "--tp N (tensor parallelism)", ""},
		{[]string{"help", "serve"}, 0, "--kv-memory is each GPU's", ""},
		{[]string{"help", "chat"}, 0, "-tp int", ""},
		{[]string{"help", "eval"}, 0, "-tp int", ""},
		{[]string{"help", "bench"}, 0, "e2e: tensor parallelism", ""},
		{[]string{"bench", "model", "-h"}, 0, "", "needs --tp 2"},
	}
	for _, tc := range tests {
		var out, errb bytes.Buffer
		code := runMain(tc.args, &out, &errb)
		if code != tc.code || !strings.Contains(out.String(), tc.stdout) || !strings.Contains(errb.String(), tc.stderr) {
			t.Errorf("bitdecode %q: exit %d, stdout %q, stderr %q; want exit %d, stdout ~%q, stderr ~%q",
				tc.args, code, out.String(), errb.String(), tc.code, tc.stdout, tc.stderr)
		}
	}
}

func TestBenchAutoFallsBackToCPU(t *testing.T) {
	var out, errb bytes.Buffer
	code := runMain([]string{"bench", "--device", "auto", "--kv", "int4", "--grid", "1x512", "--reps", "1"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(errb.String(), "running on the CPU") {
		t.Errorf("stderr lacks the fallback line: %q", errb.String())
	}
	if !strings.Contains(out.String(), "| int4:kc128:v128:res128 | 1 | 512 |") {
		t.Errorf("table lacks the int4 row:\n%s", out.String())
	}
}

// TestRunEmbedded is the README's first command: the embedded model with an
// int4 KV cache and the fp16 comparison.
func TestRunEmbedded(t *testing.T) {
	var out, errb bytes.Buffer
	code := runMain([]string{"run", "--kv", "int4", "--device", "cpu", "func main() {"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.HasPrefix(out.String(), "func main() {") {
		t.Errorf("stdout %q: want the prompt and a continuation", out.String())
	}
	e := errb.String()
	if n := strings.Count(e, "embedded model"); n != 1 {
		t.Errorf("stderr names the embedded model %d times, want once:\n%s", n, e)
	}
	for _, want := range []string{"decode tok/s", "KV at 1024 tokens", "int4:kc128:v64:res128", "saved", "tok/s"} {
		if !strings.Contains(e, want) {
			t.Errorf("stderr lacks %q:\n%s", want, e)
		}
	}
}

// TestRunJSON constrains run's output to JSON (--json, --json-schema
// inline and from a file) and refuses what it cannot enforce.
func TestRunJSON(t *testing.T) {
	schemaFile := filepath.Join(t.TempDir(), "s.json")
	if err := os.WriteFile(schemaFile, []byte(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--json"}, {"--json-schema", `{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}`}, {"--json-schema", schemaFile}} {
		var out, errb bytes.Buffer
		code := runMain(append([]string{"run", "--device", "cpu", "--quiet", "--max-tokens", "200"}, append(args, "x = ")...), &out, &errb)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errb.String())
		}
		doc := strings.TrimSpace(strings.TrimPrefix(out.String(), "x = "))
		var v map[string]any
		if err := json.Unmarshal([]byte(doc), &v); err != nil {
			t.Errorf("%v: output %q is not a JSON object: %v", args, doc, err)
		}
		if args[0] == "--json-schema" && len(v) != 1 {
			t.Errorf("%v: %q does not match the schema", args, doc)
		}
	}
	var out, errb bytes.Buffer
	if code := runMain([]string{"run", "--device", "cpu", "--quiet", "--json-schema", `{"type":"string","format":"date"}`, "x"}, &out, &errb); code == 0 || !strings.Contains(errb.String(), `"format"`) {
		t.Errorf("an unsupported keyword: exit %d, %s", code, errb.String())
	}
}

func TestRunOnReferenceModel(t *testing.T) {
	dir := testmodel.Dir(t)
	var out, errb bytes.Buffer
	code := runMain([]string{"run", "--model", dir, "--kv", "int4", "--device", "cpu", "--max-tokens", "8", "func main() {"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.HasPrefix(out.String(), "func main() {") || len(out.String()) <= len("func main() {\n") {
		t.Errorf("stdout %q: want the prompt and a continuation", out.String())
	}
	if !strings.Contains(errb.String(), "new tokens at") || !strings.Contains(errb.String(), "fp16 would be") {
		t.Errorf("stderr lacks the statistics line: %q", errb.String())
	}
}

func TestRunQuantizedWeights(t *testing.T) {
	dir := testmodel.Dir(t)
	var out, errb bytes.Buffer
	code := runMain([]string{"run", "--model", dir, "--kv", "int4", "--weights", "int4", "--dec-k", "16", "--device", "cpu", "--max-tokens", "4", "func main() {"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(errb.String(), "weights int4:g128:rtn:") || !strings.Contains(errb.String(), "DEC k_chunk 16") {
		t.Errorf("stderr lacks the weight memory: %q", errb.String())
	}
}

// TestDECTimingsNeedGPU checks that 'tune dec' and 'bench dec' fail with a
// clear error on a machine without a GPU (skipped where there is one: they
// would run).
func TestDECTimingsNeedGPU(t *testing.T) {
	if needGPU("tune dec") == nil {
		t.Skip("a GPU is present: tune dec would run")
	}
	for _, args := range [][]string{{"tune", "dec", "--shapes", "llama-3.1-8b"}, {"bench", "dec"}} {
		var out, errb bytes.Buffer
		if code := runMain(args, &out, &errb); code != 1 || !strings.Contains(errb.String(), "runs on a GPU") {
			t.Errorf("bitdecode %q: exit %d, stderr %q; want exit 1 saying it needs a GPU", args, code, errb.String())
		}
	}
}

// TestRunTunedDEC runs the reference model with --dec-k tuned:5% from a
// bitdecode.json beside a copy of its files: the loader must say what it
// chose per shape and the statistics line must show per-shape DEC; a target
// that was not tuned, and a model without a tuning, fail clearly.
func TestRunTunedDEC(t *testing.T) {
	src := testmodel.Dir(t)
	dir := t.TempDir()
	for _, f := range []string{"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "generation_config.json"} {
		if _, err := os.Stat(filepath.Join(src, f)); err != nil {
			continue
		}
		if err := os.Symlink(filepath.Join(src, f), filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	run := func(decK string) (int, string) {
		var out, errb bytes.Buffer
		code := runMain([]string{"run", "--model", dir, "--kv", "int4", "--weights", "int4", "--dec-k", decK, "--device", "cpu", "--max-tokens", "4", "func main() {"}, &out, &errb)
		return code, errb.String()
	}
	if code, e := run("tuned:5%"); code != 1 || !strings.Contains(e, "no DEC tuning for int4") || !strings.Contains(e, "tune dec") {
		t.Fatalf("no tuning: exit %d, stderr %q", code, e)
	}
	settings := `{"dec": {"int4": {"device": "test", "mode": "serial", "residual": "int4", "tokens": 1, "date": "2026-01-01", "shapes": [
		{"n": 512, "k": 512, "base_us": 5, "picks": [{"slowdown_pct": 5, "k_chunk": 32, "n_tb": 4}]},
		{"n": 256, "k": 512, "base_us": 4, "picks": [{"slowdown_pct": 5, "k_chunk": 0, "n_tb": 0}]},
		{"n": 1536, "k": 512, "base_us": 6, "picks": [{"slowdown_pct": 5, "k_chunk": 16, "n_tb": 8}]},
		{"n": 512, "k": 1536, "base_us": 6, "picks": [{"slowdown_pct": 5, "k_chunk": 64, "n_tb": 8}]}]}}}`
	if err := os.WriteFile(filepath.Join(dir, "bitdecode.json"), []byte(settings), 0o644); err != nil {
		t.Fatal(err)
	}
	code, e := run("tuned:5%")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, e)
	}
	for _, want := range []string{"DEC tuned:5% from", "512x512 k_chunk 32 n_tb 4", "DEC k_chunk per layer (down_proj:64 gate_proj:16 k_proj:0 o_proj:32 q_proj:0 up_proj:16 v_proj:0)"} {
		if !strings.Contains(e, want) {
			t.Errorf("stderr lacks %q:\n%s", want, e)
		}
	}
	if code, e := run("tuned:10%"); code != 1 || !strings.Contains(e, "tuned: 5%") {
		t.Errorf("untuned target: exit %d, stderr %q", code, e)
	}
}

// TestHelpOnce checks that -h prints a command's help once, on stdout, and
// that a mistyped flag prints only the short usage error, on stderr.
func TestHelpOnce(t *testing.T) {
	for _, args := range [][]string{{"run", "-h"}, {"bench", "attn", "-h"}, {"serve", "-h"}, {"eval", "ppl", "-h"}, {"inspect", "kv", "-h"}} {
		var out, errb bytes.Buffer
		if code := runMain(args, &out, &errb); code != 0 {
			t.Errorf("bitdecode %q: exit %d, want 0", args, code)
		}
		if n := strings.Count(out.String(), "usage: bitdecode"); n != 1 {
			t.Errorf("bitdecode %q: the help's usage line appears %d times on stdout, want once", args, n)
		}
	}
	var out, errb bytes.Buffer
	if code := runMain([]string{"run", "--bogus"}, &out, &errb); code != 2 {
		t.Errorf("bitdecode run --bogus: exit %d, want 2", code)
	}
	if out.Len() != 0 || !strings.Contains(errb.String(), "flag provided but not defined: -bogus") {
		t.Errorf("bitdecode run --bogus: stdout %q, stderr %q; want nothing on stdout and the flag error on stderr", out.String(), errb.String())
	}
}

func TestStartProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.prof")
	stop, err := startProfile(func(k string) (string, bool) { return path, k == "BITDECODE_CPUPROFILE" })
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if st, err := os.Stat(path); err != nil || st.Size() == 0 {
		t.Errorf("profile file %s: %v (size %v), want a written profile", path, err, st)
	}
	if _, err := startProfile(func(string) (string, bool) { return filepath.Join(path, "x", "y"), true }); err == nil {
		t.Error("startProfile into a path under a file: no error")
	}
	stop, err = startProfile(func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	stop()
}

// TestRunTP: 'run --device cpu --tp 2' (two CPU ranks: the sharding, the
// all-reduces and the per-rank KV cache) prints the same greedy text as one
// device, and says it runs on two ranks.
func TestRunTP(t *testing.T) {
	args := []string{"run", "--device", "cpu", "--max-tokens", "24", "--compare-fp16=false", "--kv", "fp16", "func main() {"}
	var out1, err1, out2, err2 bytes.Buffer
	if code := runMain(args, &out1, &err1); code != 0 {
		t.Fatalf("--tp 1: exit %d: %s", code, err1.String())
	}
	if code := runMain(append([]string{"run", "--tp", "2"}, args[1:]...), &out2, &err2); code != 0 {
		t.Fatalf("--tp 2: exit %d: %s", code, err2.String())
	}
	if out1.String() != out2.String() {
		t.Errorf("--tp 2 prints\n%q\n--tp 1\n%q", out2.String(), out1.String())
	}
	if !strings.Contains(err2.String(), "tensor parallelism: 2 ranks on cpu") {
		t.Errorf("--tp 2: stderr does not say so:\n%s", err2.String())
	}
}
