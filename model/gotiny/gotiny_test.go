package gotiny_test

import (
	"encoding/json"
	"strings"
	"testing"

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
