package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// referenceCase is one entry of testdata/reference.json, written by
// testdata/gen_reference.js with the reference implementation (Hugging Face
// tokenizers) from the fixtures that testdata/gen_fixtures.py writes.
type referenceCase struct {
	Text             string `json:"text"`
	IDs              []int  `json:"ids"`                 // add_special_tokens=False
	IDsSpecial       []int  `json:"ids_special"`         // add_special_tokens=True
	IDsSpecialAsText []int  `json:"ids_special_as_text"` // encode_special_tokens=True
	Decoded          string `json:"decoded"`             // decode(ids_special, skip_special_tokens=False)
	DecodedSkip      string `json:"decoded_skip"`        // decode(ids_special, skip_special_tokens=True)
}

func loadReference(t testing.TB) map[string][]referenceCase {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Fixtures map[string][]referenceCase `json:"fixtures"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r.Fixtures
}

// loadFixture builds a tokenizer from testdata/NAME.json alone, as the
// reference sees it (no tokenizer_config.json).
func loadFixture(t testing.TB, name string) *Tokenizer {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := New(Files{Tokenizer: b})
	if err != nil {
		t.Fatalf("New(%s): %v", name, err)
	}
	return tok
}

// TestReference compares every fixture with the reference's ids and texts.
func TestReference(t *testing.T) {
	ref := loadReference(t)
	names := make([]string, 0, len(ref))
	for name := range ref {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			tok := loadFixture(t, name)
			for _, c := range ref[name] {
				if got := tok.Encode(c.Text, false); !equalInts(got, c.IDs) {
					t.Errorf("Encode(%q, false)\n got %v\nwant %v", c.Text, got, c.IDs)
				}
				if got := tok.Encode(c.Text, true); !equalInts(got, c.IDsSpecial) {
					t.Errorf("Encode(%q, true)\n got %v\nwant %v", c.Text, got, c.IDsSpecial)
				}
				if got := tok.EncodeWith(c.Text, EncodeOptions{SpecialAsText: true}); !equalInts(got, c.IDsSpecialAsText) {
					t.Errorf("EncodeWith(%q, SpecialAsText)\n got %v\nwant %v", c.Text, got, c.IDsSpecialAsText)
				}
				if got := tok.Decode(c.IDsSpecial); got != c.Decoded {
					t.Errorf("Decode(%v) = %q, want %q", c.IDsSpecial, got, c.Decoded)
				}
				if got := tok.DecodeWith(c.IDsSpecial, DecodeOptions{SkipSpecial: true}); got != c.DecodedSkip {
					t.Errorf("DecodeWith(%v, SkipSpecial) = %q, want %q", c.IDsSpecial, got, c.DecodedSkip)
				}
			}
		})
	}
}
