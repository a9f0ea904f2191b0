package tokenizer

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// minimal returns a valid tokenizer.json with one field replaced.
func minimal(field, value string) string {
	fields := map[string]string{
		"version":        `"1.0"`,
		"added_tokens":   `[{"id": 3, "content": "<s>", "special": true}]`,
		"normalizer":     `null`,
		"pre_tokenizer":  `{"type": "ByteLevel", "add_prefix_space": false, "use_regex": true}`,
		"post_processor": `null`,
		"decoder":        `{"type": "ByteLevel"}`,
		"model":          `{"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}`,
	}
	if value == "" {
		delete(fields, field)
	} else {
		fields[field] = value
	}
	var b strings.Builder
	b.WriteString("{")
	first := true
	for _, k := range []string{"version", "added_tokens", "normalizer", "pre_tokenizer", "post_processor", "decoder", "model"} {
		v, ok := fields[k]
		if !ok {
			continue
		}
		if !first {
			b.WriteString(",")
		}
		first = false
		b.WriteString(`"` + k + `": ` + v)
	}
	b.WriteString("}")
	return b.String()
}

// TestLoadErrors checks that bad files give a LoadError naming the field.
func TestLoadErrors(t *testing.T) {
	if _, err := New(Files{Tokenizer: []byte(minimal("", ""))}); err != nil {
		t.Fatalf("the minimal file does not load: %v", err)
	}
	tests := []struct {
		name        string
		json        string
		field       string // wanted LoadError.Field
		msg         string // wanted in the message
		unsupported bool
	}{
		{"not JSON", `{"model": `, "", "unexpected end", false},
		{"array", `[]`, "", "want an object", false},
		{"no model", minimal("model", ""), "model", "want an object", false},
		{"version", minimal("version", `"2.0"`), "version", "unknown tokenizer.json version", false},
		{"WordPiece", minimal("model", `{"type": "WordPiece", "vocab": {}}`), "model.type", "supported: BPE", true},
		{"Unigram", minimal("model", `{"type": "Unigram", "vocab": []}`), "model.type", "Unigram", true},
		{"negative id", minimal("model", `{"type": "BPE", "vocab": {"a": -1}, "merges": []}`), "model.vocab.a", "out of range", false},
		{"string id", minimal("model", `{"type": "BPE", "vocab": {"a": "0"}, "merges": []}`), "model.vocab.a", "want an integer", false},
		{"huge id", minimal("model", `{"type": "BPE", "vocab": {"a": 99999999999}, "merges": []}`), "model.vocab.a", "out of range", false},
		{"sparse ids", minimal("model", `{"type": "BPE", "vocab": {"a": 9000000}, "merges": []}`), "model.vocab", "sparse", false},
		{"no merges", minimal("model", `{"type": "BPE", "vocab": {"a": 0}}`), "model.merges", "missing", false},
		{"merge not in vocab", minimal("model", `{"type": "BPE", "vocab": {"a": 0}, "merges": ["a c"]}`), "model.merges[0]", `"c" is not in model.vocab`, false},
		{"merge result not in vocab", minimal("model", `{"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": [["a", "b"]]}`), "model.merges[0]", `"ab" is not in model.vocab`, false},
		{"merge three parts", minimal("model", `{"type": "BPE", "vocab": {"a": 0}, "merges": ["a a a"]}`), "model.merges[0]", "one space", false},
		{"merge pair of three", minimal("model", `{"type": "BPE", "vocab": {"a": 0}, "merges": [["a", "a", "a"]]}`), "model.merges[0]", "3 elements", false},
		{"merge number", minimal("model", `{"type": "BPE", "vocab": {"a": 0}, "merges": [7]}`), "model.merges[0]", "want", false},
		{"unk missing", minimal("model", `{"type": "BPE", "vocab": {"a": 0}, "merges": [], "unk_token": "<unk>"}`), "model.unk_token", "not in model.vocab", false},
		{"dropout", minimal("model", `{"type": "BPE", "vocab": {"a": 0}, "merges": [], "dropout": 3}`), "model.dropout", "not in [0, 1]", false},
		{"Precompiled", minimal("normalizer", `{"type": "Precompiled", "precompiled_charsmap": ""}`), "normalizer.type", "unsupported normalizer", true},
		{"bad regex", minimal("pre_tokenizer", `{"type": "Split", "pattern": {"Regex": "(a"}, "behavior": "Isolated", "invert": false}`), "pre_tokenizer.pattern", "cannot compile", false},
		{"bad behavior", minimal("pre_tokenizer", `{"type": "Split", "pattern": {"String": " "}, "behavior": "Sideways", "invert": false}`), "pre_tokenizer.behavior", "Sideways", false},
		{"bad pattern", minimal("pre_tokenizer", `{"type": "Split", "pattern": {"Glob": "*"}, "behavior": "Isolated"}`), "pre_tokenizer.pattern", `{"Regex": ...}`, false},
		{"unknown pre_tokenizer", minimal("pre_tokenizer", `{"type": "UnicodeScripts"}`), "pre_tokenizer.type", "unsupported pre_tokenizer", true},
		{"metaspace replacement", minimal("pre_tokenizer", `{"type": "Metaspace", "replacement": "ab"}`), "pre_tokenizer.replacement", "one character", false},
		{"metaspace scheme", minimal("pre_tokenizer", `{"type": "Metaspace", "replacement": "_", "prepend_scheme": "sometimes"}`), "pre_tokenizer.prepend_scheme", "sometimes", false},
		{"sequence not array", minimal("pre_tokenizer", `{"type": "Sequence", "pretokenizers": {}}`), "pre_tokenizer.pretokenizers", "want an array", false},
		{"sequence element", minimal("normalizer", `{"type": "Sequence", "normalizers": [{"type": "NFC"}, 5]}`), "normalizer.normalizers[1]", "want an object", false},
		{"deep nesting", minimal("decoder", strings.Repeat(`{"type": "Sequence", "decoders": [`, 20)+`{"type": "Fuse"}`+strings.Repeat(`]}`, 20)), "decoder" + strings.Repeat(".decoders[0]", 17), "nested more than 16", false},
		{"unknown decoder", minimal("decoder", `{"type": "CTC"}`), "decoder.type", "unsupported decoder", true},
		{"strip content", minimal("decoder", `{"type": "Strip", "content": "", "start": 1, "stop": 0}`), "decoder.content", "one character", false},
		{"added token content", minimal("added_tokens", `[{"id": 3, "content": "<s>"}, {"id": 4}]`), "added_tokens[1].content", "want a string", false},
		{"added token flag", minimal("added_tokens", `[{"id": 3, "content": "<s>", "special": "yes"}]`), "added_tokens[0].special", "want a boolean", false},
		{"template unknown special", minimal("post_processor", `{"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<x>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}], "special_tokens": {}}`), "post_processor.single[0].SpecialToken.id", "not in special_tokens", false},
		{"template no A", minimal("post_processor", `{"type": "TemplateProcessing", "single": [], "special_tokens": {}}`), "post_processor.single", "does not use sequence A", false},
		{"template id outside vocab", minimal("post_processor", `{"type": "TemplateProcessing", "single": "<x> $A", "special_tokens": {"<x>": {"id": "<x>", "ids": [77], "tokens": ["<x>"]}}}`), "post_processor", "not in the vocabulary", false},
		{"roberta", minimal("post_processor", `{"type": "RobertaProcessing", "sep": ["</s>"], "cls": ["<s>", 0]}`), "post_processor.sep", "want [token, id]", false},
	}
	for _, tc := range tests {
		_, err := New(Files{Tokenizer: []byte(tc.json)})
		var le *LoadError
		if !errors.As(err, &le) {
			t.Errorf("%s: err = %v, want a *LoadError", tc.name, err)
			continue
		}
		if le.File != TokenizerFile || le.Field != tc.field || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: err = %q (field %q), want field %q and %q", tc.name, err, le.Field, tc.field, tc.msg)
		}
		if errors.Is(err, ErrUnsupported) != tc.unsupported {
			t.Errorf("%s: errors.Is(err, ErrUnsupported) = %v", tc.name, !tc.unsupported)
		}
	}
}

// TestConfigErrors checks the other two files.
func TestConfigErrors(t *testing.T) {
	tok := []byte(minimal("", ""))
	tests := []struct {
		files Files
		file  string
		field string
	}{
		{Files{Tokenizer: tok, TokenizerConfig: []byte(`{"bos_token": 5}`)}, TokenizerConfigFile, "bos_token"},
		{Files{Tokenizer: tok, TokenizerConfig: []byte(`{"add_bos_token": "true"}`)}, TokenizerConfigFile, "add_bos_token"},
		{Files{Tokenizer: tok, TokenizerConfig: []byte(`{"chat_template": [{"name": "x"}]}`)}, TokenizerConfigFile, "chat_template[0].template"},
		{Files{Tokenizer: tok, TokenizerConfig: []byte(`{"added_tokens_decoder": {"x": {"content": "a"}}}`)}, TokenizerConfigFile, "added_tokens_decoder.x"},
		{Files{Tokenizer: tok, TokenizerConfig: []byte(`not json`)}, TokenizerConfigFile, ""},
		{Files{Tokenizer: tok, GenerationConfig: []byte(`{"eos_token_id": ["x"]}`)}, GenerationConfigFile, "eos_token_id[0]"},
		{Files{Tokenizer: tok, GenerationConfig: []byte(`{"bos_token_id": -4}`)}, GenerationConfigFile, "bos_token_id"},
	}
	for _, tc := range tests {
		_, err := New(tc.files)
		var le *LoadError
		if !errors.As(err, &le) || le.File != tc.file || le.Field != tc.field {
			t.Errorf("New(%s %s) err = %v, want a LoadError for %s field %q", tc.files.TokenizerConfig, tc.files.GenerationConfig, err, tc.file, tc.field)
		}
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing")); err == nil || !strings.HasPrefix(err.Error(), "tokenizer: ") {
		t.Errorf("Load(missing dir) = %v", err)
	}
}

// TestLoadWithoutTokenizerJSON checks Load's error for a checkpoint whose
// tokenizer is not a tokenizer.json: ChatGLM3's, Baichuan 2's and InternLM2's
// repositories ship a SentencePiece tokenizer.model and custom code, Qwen's
// first release a tiktoken file, BERT's a WordPiece vocab.txt, GPT-2's
// slow files vocab.json and merges.txt.
func TestLoadWithoutTokenizerJSON(t *testing.T) {
	tests := []struct {
		name        string
		files       map[string]string
		unsupported bool
		want        string // the message after "tokenizer: DIR has no tokenizer.json (open DIR/tokenizer.json: ...)"
	}{
		{"chatglm3", map[string]string{
			"tokenizer.model":       "x",
			"tokenizer_config.json": `{"auto_map": {"AutoTokenizer": ["tokenization_chatglm.ChatGLMTokenizer", null]}, "tokenizer_class": "ChatGLMTokenizer", "eos_token": "</s>"}`,
		}, true, ", the only tokenizer file this package reads (Hugging Face tokenizers' serialization); " +
			"it has tokenizer_config.json's tokenizer_class ChatGLMTokenizer, custom Python code " +
			"(tokenization_chatglm.ChatGLMTokenizer in auto_map), a SentencePiece model (tokenizer.model) instead: " +
			"unsupported; a tokenizer.json converted from it would be read"},
		{"qwen-tiktoken", map[string]string{
			"qwen.tiktoken":         "x",
			"tokenizer_config.json": `{"auto_map": {"AutoTokenizer": "tokenization_qwen.QWenTokenizer"}}`,
		}, true, ", the only tokenizer file this package reads (Hugging Face tokenizers' serialization); " +
			"it has custom Python code (tokenization_qwen.QWenTokenizer in auto_map), a tiktoken vocabulary (qwen.tiktoken) instead: " +
			"unsupported; a tokenizer.json converted from it would be read"},
		{"wordpiece", map[string]string{"vocab.txt": "[UNK]\n", "tokenizer_config.json": `{"tokenizer_class": "BertTokenizer"}`}, true,
			", the only tokenizer file this package reads (Hugging Face tokenizers' serialization); " +
				"it has tokenizer_config.json's tokenizer_class BertTokenizer, a WordPiece vocabulary (vocab.txt) instead: " +
				"unsupported; a tokenizer.json converted from it would be read"},
		{"gpt2-slow", map[string]string{"vocab.json": "{}", "merges.txt": ""}, true,
			", the only tokenizer file this package reads (Hugging Face tokenizers' serialization); " +
				"it has a byte-level BPE's vocab.json and merges.txt instead: unsupported; a tokenizer.json converted from it would be read"},
		{"nothing", map[string]string{"config.json": "{}", "vocab.json": "{}"}, false,
			" and no other tokenizer file; this package reads tokenizer.json (Hugging Face tokenizers' serialization)"},
	}
	for _, tc := range tests {
		dir := t.TempDir()
		for name, body := range tc.files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		// The directory, and the path of the missing tokenizer.json in it.
		for _, path := range []string{dir, filepath.Join(dir, TokenizerFile)} {
			_, err := Load(path)
			if err == nil {
				t.Fatalf("%s: Load(%s) succeeded", tc.name, path)
			}
			prefix := "tokenizer: " + dir + " has no tokenizer.json (open " + filepath.Join(dir, TokenizerFile) + ": "
			if msg := err.Error(); !strings.HasPrefix(msg, prefix) || !strings.HasSuffix(msg, ")"+tc.want) {
				t.Errorf("%s: Load(%s) = %q\nwant %q...%q", tc.name, path, msg, prefix, ")"+tc.want)
			}
			if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrUnsupported) != tc.unsupported {
				t.Errorf("%s: Load(%s): errors.Is(err, fs.ErrNotExist) = %v, errors.Is(err, ErrUnsupported) = %v, want true, %v",
					tc.name, path, errors.Is(err, fs.ErrNotExist), errors.Is(err, ErrUnsupported), tc.unsupported)
			}
		}
	}
}

// fuzzSeeds returns the fixtures and the real tokenizer.json when present.
func fuzzSeeds(f *testing.F) [][]byte {
	var seeds [][]byte
	names, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	for _, n := range names {
		if strings.HasSuffix(n, "reference.json") {
			continue
		}
		b, err := os.ReadFile(n)
		if err == nil {
			seeds = append(seeds, b)
		}
	}
	seeds = append(seeds, []byte(minimal("", "")))
	return seeds
}

// FuzzLoad feeds arbitrary bytes (and truncated fixtures) to the loader: it
// must return a tokenizer or an error, never panic, and a tokenizer it
// returns must encode and decode without panicking and give ids inside the
// vocabulary.
func FuzzLoad(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s, []byte(nil))
		f.Add(s[:len(s)/2], []byte(nil))
		f.Add(s[:len(s)*9/10], []byte(`{"bos_token": "<s>", "add_bos_token": true, "add_eos_token": true}`))
	}
	f.Fuzz(func(t *testing.T, data, config []byte) {
		tok, err := New(Files{Tokenizer: data, TokenizerConfig: config})
		if err != nil {
			var le *LoadError
			if !errors.As(err, &le) {
				t.Fatalf("error %v is not a *LoadError", err)
			}
			return
		}
		for _, s := range []string{"", "Hello world", " a\n\n\tb  ", "<s>x</s>", "日本語 🤗 12345", "\xff\xfe"} {
			ids := tok.EncodeWith(s, EncodeOptions{AddSpecial: true})
			for _, id := range ids {
				if id < 0 || id >= tok.VocabSize() {
					t.Fatalf("Encode(%q) gave id %d outside [0, %d)", s, id, tok.VocabSize())
				}
			}
			_ = tok.Decode(ids)
			st := tok.NewDecodeStream(DecodeOptions{})
			for _, id := range ids {
				st.Step(id)
			}
			st.Flush()
		}
		_, _ = tok.EncodeChat([]Message{{Role: "user", Content: "hi"}}, ChatOptions{AddGenerationPrompt: true})
	})
}

// FuzzEncodeDecode checks decode(encode(s)) == s for byte-level tokenizers
// on any valid UTF-8 text (invalid UTF-8 is first replaced by U+FFFD), and
// that streaming decode gives the same text.
func FuzzEncodeDecode(f *testing.F) {
	var toks []*Tokenizer
	for _, name := range []string{"llama3_split", "gpt2_prefix"} {
		toks = append(toks, loadFixture(f, name))
	}
	if dir := gocoderDirNoSkip(); dir != "" {
		tok, err := Load(dir)
		if err != nil {
			f.Fatal(err)
		}
		toks = append(toks, tok)
	}
	for _, s := range []string{"", "Hello world", "a   b", "DON'T 1234567", "\n\n\t", "🤗👍🏽 你好", "<|eot_id|>x", "\xe2\x82", "ſ'S", "\u00a0 \u2028"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := strings.ToValidUTF8(s, "\uFFFD")
		for i, tok := range toks {
			ids := tok.Encode(s, false)
			got := tok.Decode(ids)
			if i == 1 && !strings.HasPrefix(want, " ") && want != "" {
				got = strings.TrimPrefix(got, " ") // gpt2_prefix adds a prefix space
			}
			if got != want {
				t.Fatalf("tokenizer %d: Decode(Encode(%q)) = %q", i, s, got)
			}
			var b strings.Builder
			st := tok.NewDecodeStream(DecodeOptions{})
			for _, id := range ids {
				c := st.Step(id)
				if !utf8.ValidString(c) {
					t.Fatalf("tokenizer %d: stream chunk %q is not valid UTF-8", i, c)
				}
				b.WriteString(c)
			}
			b.WriteString(st.Flush())
			if b.String() != tok.Decode(ids) {
				t.Fatalf("tokenizer %d: stream %q != Decode %q", i, b.String(), tok.Decode(ids))
			}
		}
	})
}
