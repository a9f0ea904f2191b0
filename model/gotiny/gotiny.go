// Package gotiny is bitdecode's built-in default model: a 2-layer Llama
// (GQA 4/2 heads, head dim 64, 1.8M parameters) trained on the Go standard
// library sources and stored with int8 weights in under 2 MB, embedded in
// the binary with its tokenizer, so that generation through the low-bit KV
// cache works on a machine with nothing downloaded.
//
// The files under files/ are an ordinary Hugging Face checkpoint directory
// in bitdecode's int8 weight format (see model/quant.go), made by
// tools/tinymodel (prepare: corpus and tokenizer; train.py: training,
// quantization and golden.json). Load goes through model.LoadCheckpoint like
// any checkpoint. LICENSE holds the Go licence of the training corpus.
//
// The package holds no logic beyond opening those files; it sits at the
// model layer (it imports model and tokenizer) and is imported by the CLI
// and by tests.
package gotiny

import (
	_ "embed"
	"encoding/json"
	"fmt"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/model"
	"github.com/bitdecode/bitdecode/model/safetensors"
	"github.com/bitdecode/bitdecode/tokenizer"
)

// Name is the embedded model's name, as it appears in messages.
const Name = "gotiny"

// The embedded checkpoint files.
var (
	//go:embed files/config.json
	configJSON []byte
	//go:embed files/model.safetensors
	weights []byte
	//go:embed files/tokenizer.json
	tokenizerJSON []byte
	//go:embed files/tokenizer_config.json
	tokenizerConfigJSON []byte
	//go:embed files/golden.json
	goldenJSON []byte
	//go:embed files/corpus.json
	corpusJSON []byte
	//go:embed files/LICENSE
	license string
)

// Files returns the embedded checkpoint's files by name (config.json,
// model.safetensors, tokenizer.json, tokenizer_config.json, golden.json,
// corpus.json, LICENSE), e.g. to write them to a directory. The caller must
// not modify the returned bytes.
func Files() map[string][]byte {
	return map[string][]byte{
		"config.json":           configJSON,
		"model.safetensors":     weights,
		"tokenizer.json":        tokenizerJSON,
		"tokenizer_config.json": tokenizerConfigJSON,
		"golden.json":           goldenJSON,
		"corpus.json":           corpusJSON,
		"LICENSE":               []byte(license),
	}
}

// License returns the licence notice of the training corpus (the Go
// standard library's BSD licence).
func License() string { return license }

// WeightBytes returns the size of the embedded model.safetensors.
func WeightBytes() int { return len(weights) }

// Config parses the embedded config.json.
func Config() (*model.Config, error) {
	c, err := model.ParseConfig(configJSON)
	if err != nil {
		return nil, fmt.Errorf("gotiny: %w", err)
	}
	return c, nil
}

// Load loads the embedded model onto be.
func Load(be backend.Backend, opts model.LoadOptions) (model.Model, error) {
	cfg, err := Config()
	if err != nil {
		return nil, err
	}
	f, err := safetensors.OpenBytes(Name+"/model.safetensors", weights)
	if err != nil {
		return nil, fmt.Errorf("gotiny: %w", err)
	}
	ck, err := safetensors.NewCheckpoint(f)
	if err != nil {
		return nil, fmt.Errorf("gotiny: %w", err)
	}
	defer ck.Close() // weights are copied into the backend
	m, err := model.LoadCheckpoint(cfg, ck, be, opts)
	if err != nil {
		return nil, fmt.Errorf("gotiny: %w", err)
	}
	return m, nil
}

// Tokenizer returns the embedded model's tokenizer.
func Tokenizer() (*tokenizer.Tokenizer, error) {
	t, err := tokenizer.New(tokenizer.Files{Tokenizer: tokenizerJSON, TokenizerConfig: tokenizerConfigJSON})
	if err != nil {
		return nil, fmt.Errorf("gotiny: %w", err)
	}
	return t, nil
}

// Golden is golden.json: greedy continuations computed by train.py with the
// reference forward pass in float32 (float32 KV) from the dequantized int8
// weights, and the model's provenance numbers.
type Golden struct {
	Reference string `json:"reference"` // what computed the continuations
	NewTokens int    `json:"new_tokens"`
	Prompts   []struct {
		Text      string    `json:"text"`
		IDs       []int     `json:"ids"`        // BOS included
		Greedy    []int     `json:"greedy_ids"` // NewTokens greedy tokens
		GreedyTxt string    `json:"greedy_text"`
		Margins   []float64 `json:"top2_margins"` // best minus second-best logit at each step
	} `json:"prompts"`
	Heldout struct {
		Packages     []string `json:"packages"`
		TokensScored int      `json:"tokens_scored"`
		PPL          float64  `json:"ppl_int8"`
		BitsPerByte  float64  `json:"bits_per_byte_int8"`
		PPLFloat     float64  `json:"ppl_fp32"`
	} `json:"heldout"`
	Training struct {
		Steps     int     `json:"steps"`
		Tokens    int64   `json:"tokens"`
		Seconds   float64 `json:"seconds"`
		Device    string  `json:"device"`
		GoVersion string  `json:"go_version"`
		Smoke     bool    `json:"smoke"`
	} `json:"training"`
}

// LoadGolden parses the embedded golden.json.
func LoadGolden() (*Golden, error) {
	var g Golden
	if err := json.Unmarshal(goldenJSON, &g); err != nil {
		return nil, fmt.Errorf("gotiny: golden.json: %w", err)
	}
	return &g, nil
}

// Placeholder reports whether the embedded files are a placeholder (a
// train.py --smoke run of a few steps, which writes gibberish) rather than
// the trained model.
func Placeholder() bool {
	g, err := LoadGolden()
	return err != nil || g.Training.Smoke
}

// Describe returns a one-line description of the embedded model for the CLI.
func Describe() string {
	what := fmt.Sprintf("%s (%.1f MB int8, Llama, trained on the Go standard library)", Name, float64(len(weights))/1e6)
	if Placeholder() {
		what += " [PLACEHOLDER weights from a smoke run: output is gibberish until the trained files are installed]"
	}
	return what
}
