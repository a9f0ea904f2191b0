package gotiny_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/bitdecode/bitdecode/backend/cpu"
	"github.com/bitdecode/bitdecode/engine"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/model"
	"github.com/bitdecode/bitdecode/model/gotiny"
	"github.com/bitdecode/bitdecode/model/safetensors"
)

// maxWeightBytes is the size budget of the embedded weights (issue #10).
const maxWeightBytes = 2_000_000

// TestEmbeddedModel checks the shape the project promises: a GQA Llama with
// a head dimension the low-bit KV kernels take, int8 weights under 2 MB,
// a tokenizer matching the vocabulary, and the Go licence alongside.
func TestEmbeddedModel(t *testing.T) {
	cfg, err := gotiny.Config()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.KVHeads >= cfg.Heads || cfg.Heads%cfg.KVHeads != 0 {
		t.Errorf("heads %d / KV heads %d: want GQA", cfg.Heads, cfg.KVHeads)
	}
	if cfg.HeadDim != 64 && cfg.HeadDim != 128 {
		t.Errorf("head dim %d, want 64 or 128", cfg.HeadDim)
	}
	if cfg.Quant == nil || cfg.Quant.Bits != 8 {
		t.Errorf("quantization %+v, want bitdecode int8", cfg.Quant)
	}
	if n := gotiny.WeightBytes(); n > maxWeightBytes {
		t.Errorf("model.safetensors is %d bytes, over the %d-byte budget", n, maxWeightBytes)
	}
	f, err := safetensors.OpenBytes("model.safetensors", gotiny.Files()["model.safetensors"])
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range f.Tensors() {
		if len(ti.Shape) == 2 && !strings.HasSuffix(ti.Name, "_scale") && ti.DType != safetensors.I8 {
			t.Errorf("2-D tensor %s is %s, want I8", ti.Name, ti.DType)
		}
	}
	tok, err := gotiny.Tokenizer()
	if err != nil {
		t.Fatal(err)
	}
	if tok.VocabSize() != cfg.Vocab {
		t.Errorf("tokenizer has %d tokens, config.json vocab_size %d", tok.VocabSize(), cfg.Vocab)
	}
	src := "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"héllo, 世界\")\n}\n"
	if got := tok.Decode(tok.Encode(src, false)); got != src {
		t.Errorf("round trip: got %q, want %q", got, src)
	}
	if !strings.Contains(gotiny.License(), "Copyright") || !strings.Contains(gotiny.License(), "Redistribution and use") {
		t.Errorf("LICENSE does not hold the Go licence:\n%s", gotiny.License())
	}
	var corpus struct {
		GoVersion string `json:"go_version"`
	}
	if err := json.Unmarshal(gotiny.Files()["corpus.json"], &corpus); err != nil || !strings.HasPrefix(corpus.GoVersion, "go") {
		t.Errorf("corpus.json: go_version %q, %v", corpus.GoVersion, err)
	}
	if gotiny.Placeholder() {
		t.Logf("the embedded files are a PLACEHOLDER (train.py --smoke); install the trained model (tools/tinymodel/README.md)")
	}
}

// tieMargin is the top-2 logit margin below which a greedy step counts as
// a near-tie: fp16 rounding of the cached K and V (relative error 2^-11)
// moves this model's logits by well under 0.01, so a step whose golden
// margin exceeds it must come out the same.
const tieMargin = 0.01

// TestGolden generates greedily from golden.json's prompts with an fp16 KV
// cache and requires the reference framework's tokens (float32 KV) exactly,
// unless the first difference comes at a near-tie of the golden logits.
// Low-bit formats report their agreement over the same tokens. The default
// int4 format keeps the newest 128 tokens in its fp16 residual block, which
// holds all of these short sequences, so the res32 variants (packed blocks
// of 32 tokens) are the ones that exercise quantized KV here: int8 must keep
// most of the agreement and int4 a fair part.
func TestGolden(t *testing.T) {
	g, err := gotiny.LoadGolden()
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Prompts) == 0 || g.NewTokens != 64 {
		t.Fatalf("golden.json: %d prompts of %d new tokens, want some of 64", len(g.Prompts), g.NewTokens)
	}
	be := cpu.New(0)
	defer be.Close()
	m, err := gotiny.Load(be, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tok, err := gotiny.Tokenizer()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("golden from %s", g.Reference)
	var report []string
	for _, spec := range []string{"fp16", "int8:kc32:res32", "int4", "int4:kc32:v32:res32", "int2:kc32:v32:res32"} {
		agree, total := 0, 0
		for _, p := range g.Prompts {
			if got := tok.Encode(p.Text, true); fmt.Sprint(got) != fmt.Sprint(p.IDs) {
				t.Fatalf("prompt %q encodes to %v, golden.json has %v", p.Text, got, p.IDs)
			}
			runs, err := engine.CompareFormats(context.Background(), be, m, tok, p.IDs, []kv.Spec{kv.MustParseSpec(spec)},
				engine.GenerateOptions{MaxTokens: len(p.Greedy), StopIDs: []int{}})
			if err != nil {
				t.Fatal(err)
			}
			got := runs[0].Stats.Tokens
			n := 0
			for n < len(got) && n < len(p.Greedy) && got[n] == p.Greedy[n] {
				n++
			}
			agree += n
			total += len(p.Greedy)
			if spec == "fp16" && n < len(p.Greedy) {
				margin := -1.0
				if n < len(p.Margins) {
					margin = p.Margins[n]
				}
				msg := fmt.Sprintf("fp16 KV, prompt %q: greedy tokens diverge from golden at %d of %d (golden top-2 margin there %.4g)\n got %v\nwant %v",
					p.Text, n, len(p.Greedy), margin, got, p.Greedy)
				if margin < 0 || margin >= tieMargin {
					t.Error(msg)
				} else {
					t.Log("near-tie, allowed: " + msg)
				}
			}
		}
		report = append(report, fmt.Sprintf("%s %d/%d", spec, agree, total))
		switch {
		case strings.HasPrefix(spec, "int8") && agree < total*3/4:
			t.Errorf("int8 KV: only %d of %d greedy tokens agree with golden", agree, total)
		case strings.HasPrefix(spec, "int4:") && agree < total/4:
			t.Errorf("int4 KV: only %d of %d greedy tokens agree with golden", agree, total)
		}
	}
	t.Logf("greedy tokens agreeing with golden before the first difference (%d prompts x %d tokens): %s",
		len(g.Prompts), g.NewTokens, strings.Join(report, ", "))
}
