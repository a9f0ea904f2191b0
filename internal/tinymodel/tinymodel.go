// Package tinymodel writes a tiny Llama checkpoint with random weights and
// a byte-level tokenizer into a directory, so that engine and server tests
// run a real forward pass, tokenizer and chat template in CI, where the
// reference checkpoint (internal/testmodel) is absent. The model is
// meaningless but deterministic: the same seed gives the same files.
package tinymodel

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/bitdecode/bitdecode/model/safetensors"
)

// The tiny model's shape: 2 layers, hidden 64, 2 query heads and 1 KV head
// of head dim 64 (the smallest head dim the KV formats support), a
// vocabulary of the 256 byte tokens plus BOS and EOS.
const (
	Layers       = 2
	Hidden       = 64
	Heads        = 2
	KVHeads      = 1
	HeadDim      = 64
	Intermediate = 128
	Vocab        = 258
	MaxPositions = 4096
	BOS          = 256
	EOS          = 257
)

// Write writes config.json, model.safetensors (F32 random weights from
// seed), tokenizer.json and tokenizer_config.json into dir.
func Write(dir string, seed uint64) error { return write(dir, seed, 0) }

// WriteKeyBias writes the tiny model as a Qwen2 checkpoint (q, k and v
// projections with biases) whose key bias puts per-channel offsets of 10 to
// 300 times the keys' spread into every key, as real models with large
// k_proj biases have; the q and v biases are small.
func WriteKeyBias(dir string, seed uint64) error { return write(dir, seed, 1) }

func write(dir string, seed uint64, keyBias int) error {
	arch, typ := "LlamaForCausalLM", "llama"
	if keyBias != 0 {
		arch, typ = "Qwen2ForCausalLM", "qwen2"
	}
	cfg := map[string]any{
		"architectures": []string{arch}, "model_type": typ,
		"hidden_size": Hidden, "intermediate_size": Intermediate, "num_hidden_layers": Layers,
		"num_attention_heads": Heads, "num_key_value_heads": KVHeads, "head_dim": HeadDim,
		"vocab_size": Vocab, "max_position_embeddings": MaxPositions, "rms_norm_eps": 1e-5,
		"rope_theta": 10000.0, "tie_word_embeddings": false, "hidden_act": "silu",
		"bos_token_id": BOS, "eos_token_id": EOS,
	}
	if err := writeJSON(filepath.Join(dir, "config.json"), cfg); err != nil {
		return err
	}
	if err := writeWeights(filepath.Join(dir, "model.safetensors"), seed, keyBias != 0); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(dir, "tokenizer.json"), tokenizerJSON()); err != nil {
		return err
	}
	return writeJSON(filepath.Join(dir, "tokenizer_config.json"), map[string]any{
		"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>", "add_bos_token": true,
	})
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		return fmt.Errorf("tinymodel: %s: %w", path, err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("tinymodel: %w", err)
	}
	return nil
}

// writeWeights writes random F32 weights: norms near 1, matrices scaled so
// that activations stay near unit size.
func writeWeights(path string, seed uint64, biases bool) error {
	H, I, V, D := Hidden, Intermediate, Vocab, HeadDim
	shapes := map[string][]int{
		"model.embed_tokens.weight": {V, H}, "model.norm.weight": {H}, "lm_head.weight": {V, H},
	}
	for l := range Layers {
		p := fmt.Sprintf("model.layers.%d.", l)
		shapes[p+"input_layernorm.weight"] = []int{H}
		shapes[p+"post_attention_layernorm.weight"] = []int{H}
		shapes[p+"self_attn.q_proj.weight"] = []int{Heads * D, H}
		shapes[p+"self_attn.k_proj.weight"] = []int{KVHeads * D, H}
		shapes[p+"self_attn.v_proj.weight"] = []int{KVHeads * D, H}
		shapes[p+"self_attn.o_proj.weight"] = []int{H, Heads * D}
		shapes[p+"mlp.gate_proj.weight"] = []int{I, H}
		shapes[p+"mlp.up_proj.weight"] = []int{I, H}
		shapes[p+"mlp.down_proj.weight"] = []int{H, I}
		if biases {
			shapes[p+"self_attn.q_proj.bias"] = []int{Heads * D}
			shapes[p+"self_attn.k_proj.bias"] = []int{KVHeads * D}
			shapes[p+"self_attn.v_proj.bias"] = []int{KVHeads * D}
		}
	}
	names := make([]string, 0, len(shapes))
	for n := range shapes {
		names = append(names, n)
	}
	sort.Strings(names)
	r := rand.New(rand.NewPCG(seed, seed^0x5eed))
	var tensors []safetensors.Tensor
	for _, name := range names {
		shape := shapes[name]
		n := 1
		for _, d := range shape {
			n *= d
		}
		data := make([]byte, 0, 4*n)
		for range n {
			var x float64
			switch {
			case strings.HasSuffix(name, "k_proj.bias"):
				// The keys' spread is about 2 (weights of std 2/sqrt(H)
				// over inputs of unit size): offsets of 10-300 spreads.
				x = 2 * (10 + 290*r.Float64()) * float64(1-2*r.IntN(2))
			case strings.HasSuffix(name, ".bias"):
				x = 0.1 * r.NormFloat64()
			case len(shape) == 1:
				x = 1 + 0.1*r.NormFloat64()
			case name == "model.embed_tokens.weight":
				x = r.NormFloat64()
			default:
				x = r.NormFloat64() * 2 / math.Sqrt(float64(shape[1]))
			}
			data = binary.LittleEndian.AppendUint32(data, math.Float32bits(float32(x)))
		}
		tensors = append(tensors, safetensors.Tensor{TensorInfo: safetensors.TensorInfo{Name: name, DType: safetensors.F32, Shape: shape}, Data: data})
	}
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, tensors, map[string]string{"format": "pt"}); err != nil {
		return fmt.Errorf("tinymodel: %w", err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("tinymodel: %w", err)
	}
	return nil
}

// tokenizerJSON is a byte-level BPE tokenizer without merges: one token per
// byte (GPT-2's byte-to-unicode alphabet), plus BOS and EOS.
func tokenizerJSON() map[string]any {
	vocab := map[string]int{}
	next := 256
	for b := 0; b < 256; b++ {
		r := rune(b)
		if !(b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE && b <= 0xFF) {
			r = rune(next)
			next++
		}
		vocab[string(r)] = b
	}
	special := func(id int, s string) map[string]any {
		return map[string]any{"id": id, "content": s, "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}
	}
	byteLevel := map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}
	return map[string]any{
		"version":        "1.0",
		"added_tokens":   []any{special(BOS, "<|begin_of_text|>"), special(EOS, "<|end_of_text|>")},
		"normalizer":     nil,
		"pre_tokenizer":  byteLevel,
		"post_processor": nil,
		"decoder":        byteLevel,
		"model": map[string]any{
			"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": nil,
			"end_of_word_suffix": nil, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
			"vocab": vocab, "merges": []any{},
		},
	}
}
