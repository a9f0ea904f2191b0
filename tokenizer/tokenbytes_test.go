package tokenizer

import (
	"bytes"
	"testing"
)

// TestTokenBytes checks that the token bytes of an encoded text, joined,
// give the text back (after its first token), for the test tokenizers of
// both kinds: byte-level and SentencePiece with byte fallback.
func TestTokenBytes(t *testing.T) {
	for _, name := range []string{"llama2_spm", "llama3_split", "qwen2_nfc"} {
		tok := loadFixtureDir(t, name)
		for _, text := range []string{" {\"a\": [1, 2.5, \"日本\"], \"b\": null}", " héllo wörld 😀\n\tx"} {
			ids := tok.Encode(text, false)
			var got []byte
			for _, id := range ids {
				got = append(got, tok.TokenBytes(id)...)
			}
			want := tok.DecodeWith(ids, DecodeOptions{SkipSpecial: true})
			// The first token may lose a leading space in decoding
			// (Metaspace); TokenBytes keeps it.
			if !bytes.Equal(got, []byte(want)) && !bytes.Equal(bytes.TrimPrefix(got, []byte(" ")), []byte(want)) {
				t.Errorf("%s: %q: token bytes %q, decoded %q", name, text, got, want)
			}
		}
		for _, a := range tok.AddedTokens() {
			if b := tok.TokenBytes(a.ID); a.Special && b != nil {
				t.Errorf("%s: special token %d has bytes %q", name, a.ID, b)
			}
		}
	}
}
