package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bitdecode/bitdecode/tokenizer"
)

// The special tokens, ids 0, 1, 2 (as in the reference checkpoint
// gocoder-23m). Every document (one source file) is BOS + text + EOS.
const (
	bosToken = "<|begin_of_text|>"
	eosToken = "<|end_of_text|>"
	padToken = "<|pad|>"
	bosID    = 0
	eosID    = 1
)

// goldenPrompts are the prompts golden.json continues (BOS prepended).
var goldenPrompts = []string{
	"func main() {",
	"package ",
	"// Copyright",
	"func (b *Buffer) Write(p []byte) (n int, err error) {\n",
}

// generated matches the line Go's convention puts in generated files
// (https://go.dev/s/generatedcode); such files (tables, syscall numbers) are
// left out of the corpus.
var generated = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`)

// sourceFile is one .go file of the corpus.
type sourceFile struct {
	pkg  string // import path, e.g. "net/http" or "cmd/compile/internal/ssa"
	path string // relative to GOROOT/src
	text string
}

// corpusInfo is corpus.json: where the text came from and how it was split.
type corpusInfo struct {
	GoVersion       string   `json:"go_version"`
	Source          string   `json:"source"`
	Rules           string   `json:"rules"`
	Licence         string   `json:"licence"`
	Files           int      `json:"files"`
	Packages        int      `json:"packages"`
	SkippedGen      int      `json:"skipped_generated_files"`
	TrainFiles      int      `json:"train_files"`
	TrainBytes      int64    `json:"train_bytes"`
	TrainTokens     int64    `json:"train_tokens"`
	HeldoutFiles    int      `json:"heldout_files"`
	HeldoutBytes    int64    `json:"heldout_bytes"`
	HeldoutTokens   int64    `json:"heldout_tokens"`
	HeldoutPct      int      `json:"heldout_pct"`
	HeldoutPackages []string `json:"heldout_packages"`
	Vocab           int      `json:"vocab_size"`
	TokenFormat     string   `json:"token_format"`
}

func goRoot(flagVal string) (string, error) {
	if flagVal != "" {
		return flagVal, nil
	}
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err == nil && len(bytes.TrimSpace(out)) > 0 {
		return string(bytes.TrimSpace(out)), nil
	}
	if r := runtime.GOROOT(); r != "" {
		return r, nil
	}
	return "", fmt.Errorf("cannot find GOROOT (pass -goroot)")
}

// heldOut reports whether package pkg is in the held-out set: FNV-1a of the
// import path, modulo 100, below pct.
func heldOut(pkg string, pct int) bool {
	h := fnv.New64a()
	h.Write([]byte(pkg))
	return int(h.Sum64()%100) < pct
}

// collect reads the corpus: every .go file under GOROOT/src except
// _test.go files, testdata/ and vendor/ trees, and generated files.
func collect(root string) (files []sourceFile, skippedGen int, err error) {
	src := filepath.Join(root, "src")
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "testdata" || n == "vendor" || (strings.HasPrefix(n, ".") && p != src) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if generated.Match(b) {
			skippedGen++
			return nil
		}
		rel, _ := filepath.Rel(src, p)
		rel = filepath.ToSlash(rel)
		files = append(files, sourceFile{pkg: pathDir(rel), path: rel, text: string(b)})
		return nil
	})
	slices.SortFunc(files, func(a, b sourceFile) int { return strings.Compare(a.path, b.path) })
	return files, skippedGen, err
}

func pathDir(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return "."
}

func prepare(out, goroot string, vocab, pct int) error {
	t0 := time.Now()
	root, err := goRoot(goroot)
	if err != nil {
		return err
	}
	verOut, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		return fmt.Errorf("reading the Go version: %w", err)
	}
	goVersion := strings.TrimSpace(strings.SplitN(string(verOut), "\n", 2)[0])
	licence, err := os.ReadFile(filepath.Join(root, "LICENSE"))
	if err != nil {
		return fmt.Errorf("reading the Go licence: %w", err)
	}
	files, skipped, err := collect(root)
	if err != nil {
		return err
	}
	var train, held []sourceFile
	pkgs, heldPkgs := map[string]bool{}, map[string]bool{}
	for _, f := range files {
		pkgs[f.pkg] = true
		if heldOut(f.pkg, pct) {
			held = append(held, f)
			heldPkgs[f.pkg] = true
		} else {
			train = append(train, f)
		}
	}
	fmt.Fprintf(os.Stderr, "%s: %d files in %d packages (%d generated files skipped); %d files in %d packages held out\n",
		goVersion, len(files), len(pkgs), skipped, len(held), len(heldPkgs))

	// Tokenizer: word counts over the training files.
	counts := map[string]int64{}
	var words []string
	for _, f := range train {
		words = splitWords(f.text, words[:0])
		for _, w := range words {
			counts[w]++
		}
	}
	fmt.Fprintf(os.Stderr, "%d distinct pre-tokenized words; training BPE to %d tokens\n", len(counts), vocab)
	m, err := trainBPE(counts, vocab, []string{bosToken, eosToken, padToken})
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "BPE trained in %v\n", time.Since(t0).Round(time.Millisecond))
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	tokJSON, err := m.tokenizerJSON()
	if err != nil {
		return err
	}
	tokCfg := tokenizerConfigJSON()
	tok, err := tokenizer.New(tokenizer.Files{Tokenizer: tokJSON, TokenizerConfig: tokCfg})
	if err != nil {
		return fmt.Errorf("the tokenizer package rejects the trained tokenizer: %w", err)
	}
	if err := verify(tok, m, train, held); err != nil {
		return err
	}

	// Token files, encoded by the tokenizer package (the engine's encoder).
	trainTok, trainBytes := encodeAll(tok, train)
	heldTok, heldBytes := encodeAll(tok, held)
	info := corpusInfo{
		GoVersion: goVersion, Source: root + "/src",
		Rules:   "*.go files under GOROOT/src; excluded: *_test.go, testdata/ and vendor/ trees, files marked '// Code generated ... DO NOT EDIT.'; one document per file: BOS + text + EOS; held out: packages whose FNV-1a-64(import path) % 100 < heldout_pct",
		Licence: "BSD-3-Clause (the Go licence, see LICENSE)",
		Files:   len(files), Packages: len(pkgs), SkippedGen: skipped,
		TrainFiles: len(train), TrainBytes: trainBytes, TrainTokens: int64(len(trainTok)),
		HeldoutFiles: len(held), HeldoutBytes: heldBytes, HeldoutTokens: int64(len(heldTok)),
		HeldoutPct: pct, Vocab: vocab, TokenFormat: "uint16 little-endian token ids",
	}
	for p := range heldPkgs {
		info.HeldoutPackages = append(info.HeldoutPackages, p)
	}
	slices.Sort(info.HeldoutPackages)
	infoJSON, _ := json.MarshalIndent(info, "", " ")

	var prompts []map[string]any
	for _, p := range goldenPrompts {
		prompts = append(prompts, map[string]any{"text": p, "ids": tok.Encode(p, true)})
	}
	promptsJSON, _ := json.MarshalIndent(map[string]any{"prompts": prompts}, "", " ")

	licenceNotice := "The embedded default model of bitdecode was trained on the source code of the Go\n" +
		"standard library (" + goVersion + "), which is distributed under the following licence.\n\n" + string(licence)
	for name, data := range map[string][]byte{
		"tokenizer.json":        tokJSON,
		"tokenizer_config.json": tokCfg,
		"train.bin":             uint16s(trainTok),
		"val.bin":               uint16s(heldTok),
		"corpus.json":           append(infoJSON, '\n'),
		"prompts.json":          append(promptsJSON, '\n'),
		"LICENSE":               []byte(licenceNotice),
	} {
		if err := os.WriteFile(filepath.Join(out, name), data, 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "train: %d files, %.1f MB, %d tokens (%.2f bytes/token); held out: %d files, %.1f MB, %d tokens; wrote %s in %v\n",
		len(train), float64(trainBytes)/1e6, len(trainTok), float64(trainBytes)/float64(len(trainTok)),
		len(held), float64(heldBytes)/1e6, len(heldTok), out, time.Since(t0).Round(time.Second))
	return nil
}

// verify checks the tokenizer package against the trainer: decode(encode(x))
// == x over every held-out file, and identical ids to the trainer's own
// encoding on every held-out file and a sample of training files.
func verify(tok *tokenizer.Tokenizer, m *bpeModel, train, held []sourceFile) error {
	check := slices.Clone(held)
	for i := 0; i < len(train); i += 50 {
		check = append(check, train[i])
	}
	var mu sync.Mutex
	var firstErr error
	parallel(len(check), func(i int) {
		f := check[i]
		got := tok.Encode(f.text, false)
		var err error
		if dec := tok.Decode(got); dec != f.text {
			err = fmt.Errorf("round trip of %s changes the text", f.path)
		} else if want := m.encode(f.text); !slices.Equal(got, want) {
			n := 0
			for n < len(got) && n < len(want) && got[n] == want[n] {
				n++
			}
			err = fmt.Errorf("%s: the tokenizer package and the trainer encode differently from token %d (%d vs %d tokens)", f.path, n, len(got), len(want))
		}
		if err != nil {
			mu.Lock()
			if firstErr == nil {
				firstErr = err
			}
			mu.Unlock()
		}
	})
	if firstErr != nil {
		return firstErr
	}
	fmt.Fprintf(os.Stderr, "verified: %d files (all held-out + every 50th training file) round-trip and encode identically in the trainer and the tokenizer package\n", len(check))
	return nil
}

// encodeAll encodes files as BOS + text + EOS documents, in order.
func encodeAll(tok *tokenizer.Tokenizer, files []sourceFile) ([]int, int64) {
	parts := make([][]int, len(files))
	parallel(len(files), func(i int) { parts[i] = tok.Encode(files[i].text, false) })
	var ids []int
	var n int64
	for i, p := range parts {
		ids = append(ids, bosID)
		ids = append(ids, p...)
		ids = append(ids, eosID)
		n += int64(len(files[i].text))
	}
	return ids, n
}

func parallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				f(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

func uint16s(ids []int) []byte {
	b := make([]byte, 2*len(ids))
	for i, id := range ids {
		binary.LittleEndian.PutUint16(b[2*i:], uint16(id))
	}
	return b
}

// tokenizerJSON writes the model as a Hugging Face tokenizer.json.
func (m *bpeModel) tokenizerJSON() ([]byte, error) {
	var b bytes.Buffer
	str := func(s string) string { j, _ := json.Marshal(s); return string(j) }
	b.WriteString(`{"version":"1.0","truncation":null,"padding":null,"added_tokens":[`)
	for i, s := range m.specials {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"id":%d,"content":%s,"single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true}`, i, str(s))
	}
	b.WriteString(`],"normalizer":null,`)
	b.WriteString(`"pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true},`)
	fmt.Fprintf(&b, `"post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":%[1]s,"type_id":0}},{"Sequence":{"id":"A","type_id":0}}],"pair":[{"SpecialToken":{"id":%[1]s,"type_id":0}},{"Sequence":{"id":"A","type_id":0}},{"SpecialToken":{"id":%[1]s,"type_id":1}},{"Sequence":{"id":"B","type_id":1}}],"special_tokens":{%[1]s:{"id":%[1]s,"ids":[%d],"tokens":[%[1]s]}}},`, str(bosToken), bosID)
	b.WriteString(`"decoder":{"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true,"use_regex":true},`)
	b.WriteString(`"model":{"type":"BPE","dropout":null,"unk_token":null,"continuing_subword_prefix":null,"end_of_word_suffix":null,"fuse_unk":false,"byte_fallback":false,"ignore_merges":false,"vocab":{`)
	n := 0
	for i, s := range m.specials {
		fmt.Fprintf(&b, "%s:%d,", str(s), i)
		n++
	}
	seen := map[string]bool{}
	for i, raw := range m.tokens {
		s := tokenString(raw)
		if seen[s] {
			return nil, fmt.Errorf("token %d %q is learned twice", i, s)
		}
		seen[s] = true
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "\n%s:%d", str(s), len(m.specials)+i)
	}
	b.WriteString(`},"merges":[`)
	base := int32(len(m.specials))
	for i, mg := range m.merges {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "\n[%s,%s]", str(tokenString(m.tokens[mg[0]-base])), str(tokenString(m.tokens[mg[1]-base])))
	}
	b.WriteString("]}}\n")
	return b.Bytes(), nil
}

func tokenizerConfigJSON() []byte {
	return []byte(`{
 "bos_token": "` + bosToken + `",
 "eos_token": "` + eosToken + `",
 "pad_token": "` + padToken + `",
 "add_bos_token": true,
 "tokenizer_class": "PreTrainedTokenizerFast",
 "model_max_length": 1024
}
`)
}
