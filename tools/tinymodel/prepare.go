package main

import (
	"bytes"
	"crypto/sha256"
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
// Each ends where a BPE token boundary falls in real code (after a newline
// or a word): a prompt ending in a bare space ("package ") or in " {" with
// the newline missing asks the model to continue from a token split it
// never saw in training.
var goldenPrompts = []string{
	"func main() {\n",
	"package main\n\nimport (\n",
	"// Copyright",
	"func (b *Buffer) Write(p []byte) (n int, err error) {\n",
	"func TestParse(t *testing.T) {\n",
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
	GoVersion  string `json:"go_version"`
	Source     string `json:"source"`
	Rules      string `json:"rules"`
	Licence    string `json:"licence"`
	Files      int    `json:"files"`
	Packages   int    `json:"packages"`
	SkippedGen int    `json:"skipped_generated_files"`
	SkippedBig int    `json:"skipped_large_files"`
	SkippedDup int    `json:"skipped_duplicate_files"`
	// Kinds: files and bytes by kind (library, test, vendor).
	Kinds         map[string]*kindStats `json:"kinds"`
	TrainFiles    int                   `json:"train_files"`
	TrainBytes    int64                 `json:"train_bytes"`
	TrainTokens   int64                 `json:"train_tokens"`
	HeldoutFiles  int                   `json:"heldout_files"`
	HeldoutBytes  int64                 `json:"heldout_bytes"`
	HeldoutTokens int64                 `json:"heldout_tokens"`
	// HeldoutLib*: val_lib.bin, the held-out packages' library files only
	// (no tests, testdata or vendored code): the held-out set of the first
	// corpus (library code only), for comparing runs in bits per byte.
	HeldoutLibFiles  int      `json:"heldout_lib_files"`
	HeldoutLibBytes  int64    `json:"heldout_lib_bytes"`
	HeldoutLibTokens int64    `json:"heldout_lib_tokens"`
	HeldoutPct       int      `json:"heldout_pct"`
	HeldoutPackages  []string `json:"heldout_packages"`
	Vocab            int      `json:"vocab_size"`
	TokenFormat      string   `json:"token_format"`
}

type kindStats struct {
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
}

// licenceText is the LICENSE file written beside the model: the Go licence,
// then each vendored module's licence (or a note that it is the same text).
func licenceText(goVersion, goLicence string, vendored []vendorLicence) string {
	var b strings.Builder
	b.WriteString("The embedded default model of bitdecode was trained on the source code of the Go\n" +
		"standard library (" + goVersion + "), including its tests and the modules vendored into it,\n" +
		"which is distributed under the following licence.\n\n" + goLicence)
	if len(vendored) == 0 {
		return b.String()
	}
	b.WriteString("\n----\n\nThe vendored modules (directories under GOROOT/src) are under these licences:\n\n")
	norm := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	for _, l := range vendored {
		if norm(l.text) == norm(goLicence) {
			fmt.Fprintf(&b, "%s: the same text as the Go licence above.\n", pathDir(l.path))
		}
	}
	for _, l := range vendored {
		if norm(l.text) != norm(goLicence) {
			fmt.Fprintf(&b, "\n%s:\n\n%s", pathDir(l.path), l.text)
		}
	}
	return b.String()
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

// excludedTrees are vendored modules left out of the corpus because their
// licence is not BSD-3-Clause (google/pprof is Apache-2.0).
var excludedTrees = []string{"cmd/vendor/github.com/google/pprof"}

// maxFileBytes caps one source file: the few larger ones (after the
// generated files are gone) are tables of test vectors and data.
const maxFileBytes = 256 << 10

// vendorLicence is a LICENSE file of a vendored module included in the corpus.
type vendorLicence struct {
	path string // relative to GOROOT/src
	text string
}

// collectStats counts what collect left out.
type collectStats struct {
	skippedGen, skippedDup, skippedBig int
	licences                           []vendorLicence
}

// collect reads the corpus: every .go file under GOROOT/src, tests
// (*_test.go) and vendored modules (vendor/ trees: golang.org/x and the
// other BSD-licensed modules) included, except testdata/ trees (fixtures,
// often deliberately broken code for the compiler and vet, and 1.7 MB that
// the token-file budget has no room for), generated files, files over
// maxFileBytes, exact duplicates (the same file vendored twice: the first
// path in sorted order is kept) and excludedTrees. A file's package is its
// directory, so the held-out split keeps a package's tests with it.
func collect(root string) (files []sourceFile, st collectStats, err error) {
	src := filepath.Join(root, "src")
	var paths []string
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && p != src || d.Name() == "testdata" || slices.Contains(excludedTrees, rel) {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Name() == "LICENSE" && strings.Contains("/"+rel, "/vendor/") {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			st.licences = append(st.licences, vendorLicence{rel, string(b)})
			return nil
		}
		if strings.HasSuffix(p, ".go") && d.Type().IsRegular() {
			paths = append(paths, rel)
		}
		return nil
	})
	if err != nil {
		return nil, st, err
	}
	slices.Sort(paths)
	seen := map[[32]byte]bool{}
	for _, rel := range paths {
		b, err := os.ReadFile(filepath.Join(src, filepath.FromSlash(rel)))
		if err != nil {
			return nil, st, err
		}
		switch h := sha256.Sum256(b); {
		case generated.Match(b):
			st.skippedGen++
		case len(b) > maxFileBytes:
			st.skippedBig++
		case seen[h]:
			st.skippedDup++
		default:
			seen[h] = true
			files = append(files, sourceFile{pkg: pathDir(rel), path: rel, text: string(b)})
		}
	}
	slices.SortFunc(st.licences, func(a, b vendorLicence) int { return strings.Compare(a.path, b.path) })
	return files, st, nil
}

// kind classifies a file for corpus.json's statistics.
func kind(rel string) string {
	switch {
	case strings.Contains("/"+rel, "/vendor/"):
		return "vendor"
	case strings.HasSuffix(rel, "_test.go"):
		return "test"
	}
	return "library"
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
	files, st, err := collect(root)
	if err != nil {
		return err
	}
	var train, held, heldLib []sourceFile
	pkgs, heldPkgs := map[string]bool{}, map[string]bool{}
	kinds := map[string]*kindStats{}
	for _, f := range files {
		pkgs[f.pkg] = true
		k := kind(f.path)
		if kinds[k] == nil {
			kinds[k] = &kindStats{}
		}
		kinds[k].Files++
		kinds[k].Bytes += int64(len(f.text))
		if heldOut(f.pkg, pct) {
			held = append(held, f)
			heldPkgs[f.pkg] = true
			if k == "library" {
				heldLib = append(heldLib, f)
			}
		} else {
			train = append(train, f)
		}
	}
	fmt.Fprintf(os.Stderr, "%s: %d files in %d packages (skipped: %d generated, %d over %d bytes, %d duplicates); %d files in %d packages held out\n",
		goVersion, len(files), len(pkgs), st.skippedGen, st.skippedBig, maxFileBytes, st.skippedDup, len(held), len(heldPkgs))
	for _, k := range []string{"library", "test", "vendor"} {
		if ks := kinds[k]; ks != nil {
			fmt.Fprintf(os.Stderr, "  %-8s %5d files %6.1f MB\n", k, ks.Files, float64(ks.Bytes)/1e6)
		}
	}

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
	libTok, libBytes := encodeAll(tok, heldLib)
	info := corpusInfo{
		GoVersion: goVersion, Source: root + "/src",
		Rules: "*.go files under GOROOT/src, *_test.go and vendored modules (vendor/ trees) included; excluded: files marked '// Code generated ... DO NOT EDIT.', files over " +
			fmt.Sprint(maxFileBytes) + " bytes, exact duplicates (first path kept), " + strings.Join(excludedTrees, ", ") +
			" (Apache-2.0), testdata/ trees; one document per file: BOS + text + EOS; a file's package is its directory; held out: packages whose FNV-1a-64(package path) % 100 < heldout_pct",
		Licence: "BSD-3-Clause (the Go licence and the vendored modules' BSD-3-Clause licences, see LICENSE)",
		Files:   len(files), Packages: len(pkgs), SkippedGen: st.skippedGen, SkippedBig: st.skippedBig, SkippedDup: st.skippedDup,
		Kinds:      kinds,
		TrainFiles: len(train), TrainBytes: trainBytes, TrainTokens: int64(len(trainTok)),
		HeldoutFiles: len(held), HeldoutBytes: heldBytes, HeldoutTokens: int64(len(heldTok)),
		HeldoutLibFiles: len(heldLib), HeldoutLibBytes: libBytes, HeldoutLibTokens: int64(len(libTok)),
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

	licenceNotice := licenceText(goVersion, string(licence), st.licences)
	for name, data := range map[string][]byte{
		"tokenizer.json":        tokJSON,
		"tokenizer_config.json": tokCfg,
		"train.bin":             uint16s(trainTok),
		"val.bin":               uint16s(heldTok),
		"val_lib.bin":           uint16s(libTok),
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
