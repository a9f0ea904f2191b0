package tokenizer

import (
	"strings"
	"testing"
)

// tokensOf encodes text and returns the tokens as stored in the vocabulary.
func tokensOf(t *testing.T, tok *Tokenizer, text string) []string {
	t.Helper()
	var out []string
	for _, id := range tok.Encode(text, false) {
		s, ok := tok.IDToToken(id)
		if !ok {
			t.Fatalf("Encode(%q) gave id %d, which names no token", text, id)
		}
		out = append(out, s)
	}
	return out
}

// TestFixtureBehaviours spells out, token by token, what HF tokenizers does
// on the hand-built fixtures, and why. The same ids are checked against the
// reference itself by TestReference; this table is the readable account.
func TestFixtureBehaviours(t *testing.T) {
	tests := []struct {
		fixture, text string
		want          string // tokens joined by "|"
		why           string
	}{
		// SentencePiece-style BPE (Llama 2): Prepend("▁") and Replace(" ",
		// "▁") normalizers, no pre-tokenizer, byte fallback.
		{"llama2_spm", "Hello world", "▁|<0x48>|e|llo|▁world",
			"'H' is not in the vocabulary, so byte fallback gives <0x48>; the prepended ▁ stays alone because no merge joins ▁ and <0x48>"},
		{"llama2_spm", " Hello", "▁|▁|<0x48>|e|llo",
			"the leading space becomes a second ▁ after the prepended one"},
		{"llama2_spm", "a<s>b", "▁|a|<s>|▁b",
			"<s> is matched before normalization; each piece around it is normalized on its own, so both get a ▁ (HF's legacy behaviour)"},
		{"llama2_spm", "Héllo", "▁|<0x48>|<0xC3>|<0xA9>|llo",
			"é is outside the vocabulary: its two UTF-8 bytes fall back to <0xC3><0xA9>"},
		{"llama2_spm", "<s>Hello", "<s>|▁|<0x48>|e|llo", "text after a special token still gets the prepended ▁"},

		// The same vocabulary with the newer conversion: Metaspace with
		// prepend_scheme "first" and [INST] control tokens.
		{"mistral_metaspace", "Hello world", "▁|<0x48>|e|llo|▁world", "same ids as the Prepend+Replace form on plain text"},
		{"mistral_metaspace", "[INST] Hello [/INST]", "[INST]|▁|<0x48>|e|llo|▁|[/INST]",
			"\" Hello \" does not start the input, so nothing is prepended: its own space gives the ▁, and the trailing space is a lone ▁"},
		{"mistral_metaspace", "[INST]Hello[/INST]", "[INST]|<0x48>|e|llo|[/INST]",
			"prepend_scheme first: no ▁ for a piece that does not start the input"},

		// GPT-2 byte-level BPE with add_prefix_space.
		{"gpt2_prefix", "Hello world", "ĠH|e|llo|Ġworld", "add_prefix_space makes the first word \" Hello\" (Ġ is the space)"},
		{"gpt2_prefix", " Hello", "ĠH|e|llo", "no second space when the text already starts with one"},
		{"gpt2_prefix", "Hello<|endoftext|>World", "ĠH|e|llo|<|endoftext|>|Ġ|W|or|l|d",
			"the prefix space is added to every piece between added tokens, so \"World\" becomes \" World\""},

		// Llama 3: Split(cl100k regex) then ByteLevel without regex;
		// ignore_merges.
		{"llama3_split", "Hello world", "H|e|llo|Ġworld", "no prefix space; the space leads \"world\""},
		{"llama3_split", "zyzzyva zyzzyva", "z|y|z|z|y|v|a|Ġzyzzyva",
			"ignore_merges: \" zyzzyva\" is in the vocabulary as a whole word and is taken directly although no merge builds it; \"zyzzyva\" is not and falls apart"},
		{"llama3_split", "DON'T", "D|O|N|'|T", "the regex keeps \"'T\" together, but this vocabulary has no token for it"},
		{"llama3_split", "1234567", "1|2|3|4|5|6|7", "digit groups 123|456|7, then single-digit tokens"},

		// Added tokens: <mask> lstrip, [SEP] rstrip, <both> both, "word"
		// single_word, "<mas" and "ab" normalized non-special, "<mask>x"
		// normalized single_word.
		{"added_strip", "hello   <mask>   world", "hello|<mask>|Ġ|Ġ|Ġworld", "lstrip: <mask> swallows the three spaces on its left, not those on its right"},
		{"added_strip", "a [SEP]   b", "a|Ġ|[SEP]|b", "rstrip: [SEP] swallows the spaces on its right, not the one on its left"},
		{"added_strip", "a   <both>   b", "a|<both>|b", "lstrip and rstrip: all six spaces go"},
		{"added_strip", "a word here", "a|Ġ|word|Ġ|he|re", "single_word: \"word\" stands alone, so it matches (without its space)"},
		{"added_strip", "sword words", "s|w|or|d|Ġwor|d|s", "single_word: inside \"sword\" and \"words\" it does not match"},
		{"added_strip", "word\u200d", "w|or|d|â|Ģ|į",
			"single_word reads words as Rust's regex \\w, which takes ZWJ (Join_Control): no match"},
		{"added_strip", "\u00b2word", "Â|²|word", "and not ², which Oniguruma's \\w (the pre-tokenizers') takes: a match"},
		{"added_strip", "<mask>x <mask>xy", "<mask>|x|<mask>|x|y",
			"<mask> (raw) is extracted before \"<mask>x\" (normalized) is looked for, so the longer token never matches"},
		{"added_strip", "<mas <mask", "<mas|Ġ|<mas|k", "a non-special added token that is a prefix of a special one"},
		{"added_strip", "xaby ab", "x|ab|y|Ġ|ab", "a non-special added token matches inside words"},

		// Qwen2: NFC before the regex; single digits.
		{"qwen2_nfc", "e\u0301t\u00e9", "Ã©|t|Ã©", "NFC composes e + U+0301 into é, which then has the same bytes as the precomposed é"},
		{"qwen2_nfc", "12345", "1|2|3|4|5", "\\p{N} alone: one digit per piece"},
	}
	cache := map[string]*Tokenizer{}
	for _, tc := range tests {
		tok := cache[tc.fixture]
		if tok == nil {
			tok = loadFixture(t, tc.fixture)
			cache[tc.fixture] = tok
		}
		got := strings.Join(tokensOf(t, tok, tc.text), "|")
		if got != tc.want {
			t.Errorf("%s: Encode(%q) = %s\nwant %s (%s)", tc.fixture, tc.text, got, tc.want, tc.why)
		}
	}
}
