package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// gocoderDir finds shared/models/gocoder-23m by walking up from the working
// directory, or skips the test.
func gocoderDir(t testing.TB) string {
	t.Helper()
	dir := gocoderDirNoSkip()
	if dir == "" {
		t.Skip("shared/models/gocoder-23m not found above the working directory; the real-checkpoint tests need it")
	}
	return dir
}

// gocoderDirNoSkip returns the checkpoint directory, or "".
func gocoderDirNoSkip() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		p := filepath.Join(dir, "shared", "models", "gocoder-23m")
		if st, err := os.Stat(filepath.Join(p, TokenizerFile)); err == nil && !st.IsDir() {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

type goldenPrompt struct {
	Text       string `json:"text"`
	IDs        []int  `json:"ids"`
	GreedyIDs  []int  `json:"greedy_ids"`
	GreedyText string `json:"greedy_text"`
}

func loadGolden(t testing.TB, dir string) []goldenPrompt {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Prompts []goldenPrompt `json:"prompts"`
	}
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	return g.Prompts
}

// TestGocoderGolden checks Encode and Decode against the ids and texts that
// the reference (transformers 5.17 with tokenizers) recorded in golden.json.
func TestGocoderGolden(t *testing.T) {
	dir := gocoderDir(t)
	tok, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range loadGolden(t, dir) {
		got := tok.Encode(p.Text, true)
		if !equalInts(got, p.IDs) {
			t.Errorf("Encode(%q, true)\n got %v\nwant %v", p.Text, got, p.IDs)
		}
		if s := tok.Decode(p.GreedyIDs); s != p.GreedyText {
			t.Errorf("Decode(%v)\n got %q\nwant %q", p.GreedyIDs, s, p.GreedyText)
		}
		if s := tok.DecodeWith(p.IDs, DecodeOptions{SkipSpecial: true}); s != p.Text {
			t.Errorf("DecodeWith(Encode(%q), SkipSpecial) = %q", p.Text, s)
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestGocoderReference compares Encode (with BOS) and Decode with the
// reference on chunks of heldout.txt and random text
// (testdata/reference_gocoder.json, written by testdata/gen_reference.js).
func TestGocoderReference(t *testing.T) {
	dir := gocoderDir(t)
	tok, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join("testdata", "reference_gocoder.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Cases []struct {
			Text    string `json:"text"`
			Offset  *int   `json:"heldout_offset"`
			Len     int    `json:"heldout_len"`
			IDs     []int  `json:"ids"`
			Decoded string `json:"decoded"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	// Chunks of heldout.txt are stored as byte ranges: the text stays in ../shared.
	held, err := os.ReadFile(filepath.Join(dir, "heldout.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range ref.Cases {
		c := &ref.Cases[i]
		if c.Offset != nil {
			if *c.Offset < 0 || *c.Offset+c.Len > len(held) {
				t.Fatalf("case %d: range [%d, +%d) outside heldout.txt (%d bytes)", i, *c.Offset, c.Len, len(held))
			}
			c.Text = string(held[*c.Offset : *c.Offset+c.Len])
		}
	}
	if len(ref.Cases) < 100 {
		t.Fatalf("only %d cases", len(ref.Cases))
	}
	for _, c := range ref.Cases {
		if got := tok.Encode(c.Text, true); !equalInts(got, c.IDs) {
			t.Errorf("Encode(%q, true)\n got %v\nwant %v", c.Text, got, c.IDs)
		}
		if got := tok.Decode(c.IDs); got != c.Decoded {
			t.Errorf("Decode(%v) = %q, want %q", c.IDs, got, c.Decoded)
		}
	}
}
