package tokenizer

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// envRealTok names a directory of real tokenizers, one folder each with its
// tokenizer.json and the reference.json that testdata/gen_realref.js wrote
// for it with the reference implementation (Hugging Face tokenizers). The
// vocabularies of real models are too large to commit, so the comparison
// runs only where such a directory is given.
const envRealTok = "BITDECODE_REALTOK_DIR"

// realCase is one text of a reference.json written by gen_realref.js:
// gen_reference.js's fields and the streaming decoder's chunks.
type realCase struct {
	referenceCase
	Stream     []string `json:"stream"`      // DecodeStream over ids_special, one chunk a step; nil: HF fails
	StreamSkip []string `json:"stream_skip"` // the same with skip_special_tokens=True
}

// realIDCase is one random id sequence of a reference.json.
type realIDCase struct {
	IDs         []int    `json:"ids"`
	Decoded     string   `json:"decoded"`
	DecodedSkip string   `json:"decoded_skip"`
	Stream      []string `json:"stream"`
	StreamSkip  []string `json:"stream_skip"`
}

// TestRealTokenizers compares Encode, Decode and DecodeStream with the
// reference on every tokenizer under $BITDECODE_REALTOK_DIR. With -short
// it checks the first 50 texts and 10 id sequences of each.
func TestRealTokenizers(t *testing.T) {
	dir := os.Getenv(envRealTok)
	if dir == "" {
		t.Skipf("%s is not set: no real tokenizers to compare (see testdata/gen_realref.js)", envRealTok)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, e := range entries {
		ref := filepath.Join(dir, e.Name(), "reference.json")
		if _, err := os.Stat(ref); err != nil {
			continue
		}
		ran++
		t.Run(e.Name(), func(t *testing.T) { checkRealTokenizer(t, filepath.Join(dir, e.Name())) })
	}
	if ran == 0 {
		t.Fatalf("%s=%s holds no folder with a reference.json", envRealTok, dir)
	}
}

func checkRealTokenizer(t *testing.T, dir string) {
	b, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	// tokenizer.json alone, as the reference reads it.
	tok, err := New(Files{Tokenizer: b})
	if err != nil {
		t.Fatal(err)
	}
	rb, err := os.ReadFile(filepath.Join(dir, "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Cases   []realCase   `json:"cases"`
		IDCases []realIDCase `json:"id_cases"`
	}
	if err := json.Unmarshal(rb, &ref); err != nil {
		t.Fatal(err)
	}
	if testing.Short() {
		ref.Cases = ref.Cases[:min(len(ref.Cases), 50)]
		ref.IDCases = ref.IDCases[:min(len(ref.IDCases), 10)]
	}
	const maxErrors = 30
	bad := 0
	fail := func(format string, args ...any) {
		t.Helper()
		if bad++; bad <= maxErrors {
			t.Errorf(format, args...)
		}
	}
	for _, c := range ref.Cases {
		if got := tok.Encode(c.Text, false); !equalInts(got, c.IDs) {
			fail("Encode(%q, false)\n got %v\nwant %v", c.Text, got, c.IDs)
		}
		if got := tok.Encode(c.Text, true); !equalInts(got, c.IDsSpecial) {
			fail("Encode(%q, true)\n got %v\nwant %v", c.Text, got, c.IDsSpecial)
		}
		if got := tok.EncodeWith(c.Text, EncodeOptions{SpecialAsText: true}); !equalInts(got, c.IDsSpecialAsText) {
			fail("EncodeWith(%q, SpecialAsText)\n got %v\nwant %v", c.Text, got, c.IDsSpecialAsText)
		}
		checkRealDecode(tok, fail, c.IDsSpecial, c.Decoded, c.DecodedSkip, c.Stream, c.StreamSkip)
	}
	for _, c := range ref.IDCases {
		checkRealDecode(tok, fail, c.IDs, c.Decoded, c.DecodedSkip, c.Stream, c.StreamSkip)
	}
	if bad > maxErrors {
		t.Errorf("... and %d more differences", bad-maxErrors)
	}
	t.Logf("%d texts, %d id sequences, %d differences", len(ref.Cases), len(ref.IDCases), bad)
	if !testing.Short() {
		checkAllCodePoints(t, tok, filepath.Join(dir, "allcp.jsonl"))
	}
}

// checkAllCodePoints compares Encode with the reference on allcp.jsonl (every
// code point in a few contexts, written by gen_realref.js with
// REALREF_ALLCP=1) when the file is there, naming the pieces that differ.
// A line holds pieces joined by a special token (sep) and their ids, or,
// for a file with no special token to join them, each piece and its ids.
func checkAllCodePoints(t *testing.T, tok *Tokenizer, path string) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	split := func(ids []int, sepID int) [][]int {
		out := [][]int{nil}
		for _, id := range ids {
			if id == sepID {
				out = append(out, nil)
			} else {
				out[len(out)-1] = append(out[len(out)-1], id)
			}
		}
		return out
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<26)
	chunks, pieces, bad := 0, 0, 0
	differ := func(piece string, got, want []int) {
		if bad++; bad <= 10 {
			t.Errorf("allcp: Encode(%+q) piece\n got %v\nwant %v", piece, got, want)
		}
	}
	for sc.Scan() {
		var c struct {
			Sep     string   `json:"sep"`
			Text    string   `json:"text"`
			IDs     []int    `json:"ids"`
			Texts   []string `json:"texts"`
			IDsList [][]int  `json:"ids_list"`
		}
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		chunks++
		if c.Sep == "" {
			if len(c.Texts) != len(c.IDsList) {
				t.Fatalf("allcp: line %d has %d texts and %d id lists", chunks, len(c.Texts), len(c.IDsList))
			}
			for i, s := range c.Texts {
				pieces++
				if got := tok.Encode(s, false); !equalInts(got, c.IDsList[i]) {
					differ(s, got, c.IDsList[i])
				}
			}
			continue
		}
		sepID, ok := tok.TokenToID(c.Sep)
		if !ok {
			t.Fatalf("allcp: separator %q is not a token", c.Sep)
		}
		ps := strings.Split(c.Text, c.Sep)
		pieces += len(ps)
		got := tok.Encode(c.Text, false)
		if equalInts(got, c.IDs) {
			continue
		}
		g, w := split(got, sepID), split(c.IDs, sepID)
		for i := range ps {
			if i >= len(g) || i >= len(w) || !equalInts(g[i], w[i]) {
				differ(ps[i], g[min(i, len(g)-1)], w[min(i, len(w)-1)])
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if chunks == 0 {
		t.Errorf("allcp: %s is empty", path)
	}
	t.Logf("allcp: %d chunks, %d pieces, %d differ", chunks, pieces, bad)
}

// checkRealDecode compares Decode and DecodeStream, with and without
// skipping special tokens, with the reference's. A nil stream is one where
// HF's DecodeStream fails (InvalidPrefix); the package's differs there on
// purpose (doc.go), so only Decode is compared then.
func checkRealDecode(tok *Tokenizer, fail func(string, ...any), ids []int, decoded, decodedSkip string, stream, streamSkip []string) {
	for _, skip := range []bool{false, true} {
		want, wantStream := decoded, stream
		if skip {
			want, wantStream = decodedSkip, streamSkip
		}
		opts := DecodeOptions{SkipSpecial: skip}
		if got := tok.DecodeWith(ids, opts); got != want {
			fail("DecodeWith(%v, skip %v)\n got %q\nwant %q", ids, skip, got, want)
		}
		chunks, flush := streamAll(tok, ids, opts)
		if wantStream == nil {
			continue
		}
		if !equalStrings(chunks, wantStream) {
			fail("DecodeStream(%v, skip %v)\n got %q\nwant %q", ids, skip, chunks, wantStream)
			continue
		}
		// What the reference streamed plus the flush is the whole text
		// when the decoder only appends.
		if joined := strings.Join(chunks, "") + flush; strings.HasPrefix(want, strings.Join(wantStream, "")) && joined != want {
			fail("DecodeStream(%v, skip %v) + Flush = %q, want %q", ids, skip, joined, want)
		}
	}
}
