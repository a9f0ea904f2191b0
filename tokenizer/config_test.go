package tokenizer

import (
	"os"
	"testing"
)

// TestSpecialTokensAndConfig checks BOS, EOS, stop ids and how
// tokenizer_config.json's add_bos_token / add_eos_token change Encode, as
// transformers (v5) applies them.
func TestSpecialTokensAndConfig(t *testing.T) {
	id := func(tok *Tokenizer, s string) int {
		t.Helper()
		i, ok := tok.TokenToID(s)
		if !ok {
			t.Fatalf("no token %q", s)
		}
		return i
	}

	// Llama 3 style: BOS from the config, EOS <|eot_id|>; stop ids add
	// <|end_of_text|>; the template of tokenizer.json adds BOS.
	l3 := loadFixtureDir(t, "llama3_split")
	bos, eot, eot2 := id(l3, "<|begin_of_text|>"), id(l3, "<|eot_id|>"), id(l3, "<|end_of_text|>")
	if b, ok := l3.BOS(); !ok || b != bos {
		t.Errorf("BOS = %d %v, want %d", b, ok, bos)
	}
	if e, ok := l3.EOS(); !ok || e != eot {
		t.Errorf("EOS = %d %v, want %d", e, ok, eot)
	}
	if got, want := l3.StopIDs(), []int{eot2, eot}; !equalInts(got, want) {
		t.Errorf("StopIDs = %v, want %v", got, want)
	}
	if ids := l3.Encode("Hi", true); ids[0] != bos {
		t.Errorf("Encode(addSpecial) = %v, want BOS first", ids)
	}
	if !l3.IsSpecial(eot) || l3.IsSpecial(id(l3, "H")) {
		t.Errorf("IsSpecial wrong")
	}
	if before, after := l3.SpecialIDs(); !equalInts(before, []int{bos}) || len(after) != 0 {
		t.Errorf("SpecialIDs = %v %v", before, after)
	}

	// add_eos_token in the config rebuilds the post-processor.
	spm := fixtureWith(t, "llama2_spm", nil, map[string]any{
		"bos_token": "<s>", "eos_token": "</s>", "add_bos_token": true, "add_eos_token": true})
	ids := spm.Encode("Hello", true)
	if ids[0] != 1 || ids[len(ids)-1] != 2 {
		t.Errorf("add_bos_token+add_eos_token: Encode = %v, want <s> ... </s>", ids)
	}
	// add_bos_token false removes the template's BOS.
	spm = fixtureWith(t, "llama2_spm", nil, map[string]any{"bos_token": "<s>", "add_bos_token": false})
	if ids := spm.Encode("Hello", true); ids[0] == 1 {
		t.Errorf("add_bos_token=false: Encode = %v, want no <s>", ids)
	}
	// Without the keys, tokenizer.json's post-processor stays.
	spm = fixtureWith(t, "llama2_spm", nil, map[string]any{"bos_token": "<s>"})
	if ids := spm.Encode("Hello", true); ids[0] != 1 {
		t.Errorf("no add_bos_token key: Encode = %v, want <s> first", ids)
	}

	// generation_config.json eos_token_id list joins the stop ids.
	tb := mustRead(t, "testdata/qwen2_nfc.json")
	tok, err := New(Files{Tokenizer: tb, TokenizerConfig: mustRead(t, "testdata/qwen2_nfc.config.json"),
		GenerationConfig: []byte(`{"bos_token_id": 5, "eos_token_id": [7, 3]}`)})
	if err != nil {
		t.Fatal(err)
	}
	imEnd, eotQ := id(tok, "<|im_end|>"), id(tok, "<|endoftext|>")
	if got, want := tok.StopIDs(), []int{3, 7, eotQ, imEnd}; !equalInts(got, want) {
		t.Errorf("StopIDs = %v, want %v", got, want)
	}
	if e, _ := tok.EOS(); e != imEnd {
		t.Errorf("EOS = %d, want <|im_end|> %d from tokenizer_config.json", e, imEnd)
	}
	if b, ok := tok.BOS(); !ok || b != 5 {
		t.Errorf("BOS = %d %v, want 5 from generation_config.json (bos_token is null)", b, ok)
	}
	if ids := tok.Encode("Hi", true); !equalInts(ids, tok.Encode("Hi", false)) {
		t.Errorf("Qwen adds no special tokens: %v", ids)
	}

	// Without generation_config.json, Qwen (bos_token null, nothing added
	// by the post-processor) has no BOS; id 0 ("!") is none.
	for _, f := range []Files{{Tokenizer: tb, TokenizerConfig: mustRead(t, "testdata/qwen2_nfc.config.json")}, {Tokenizer: tb}} {
		tok, err := New(f)
		if err != nil {
			t.Fatal(err)
		}
		if b, ok := tok.BOS(); ok {
			t.Errorf("BOS = %d with no bos_token, bos_token_id or template BOS, want none", b)
		}
	}
}

// TestVocabulary checks the id <-> token maps and VocabSize.
func TestVocabulary(t *testing.T) {
	tok := loadFixture(t, "llama3_split")
	n := tok.VocabSize()
	if s, ok := tok.IDToToken(n - 1); !ok || s != "<|eot_id|>" {
		t.Errorf("last id %d is %q %v, want <|eot_id|>", n-1, s, ok)
	}
	for _, id := range []int{-1, n, 1 << 40} {
		if _, ok := tok.IDToToken(id); ok {
			t.Errorf("IDToToken(%d) ok", id)
		}
	}
	if id, ok := tok.TokenToID("Ġworld"); !ok || tok.Decode([]int{id}) != " world" {
		t.Errorf("TokenToID(Ġworld) = %d %v", id, ok)
	}
	if _, ok := tok.TokenToID("no such token"); ok {
		t.Error("TokenToID of a missing token is ok")
	}
	if got := tok.Decode([]int{-5, n + 3}); got != "" {
		t.Errorf("Decode of unknown ids = %q, want \"\" (skipped)", got)
	}
	added := tok.AddedTokens()
	if len(added) != 8 || added[0].Content != "<|begin_of_text|>" || !added[0].Special {
		t.Errorf("AddedTokens = %+v", added)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
