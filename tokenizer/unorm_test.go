package tokenizer

import "testing"

// TestNormalizeUnicode checks each step of UAX #15 on known values
// (composition, Hangul, singletons, exclusions, canonical ordering,
// compatibility mappings).
func TestNormalizeUnicode(t *testing.T) {
	tests := []struct {
		form, in, want string
	}{
		{"NFC", "e\u0301", "\u00e9"},
		{"NFD", "\u00e9", "e\u0301"},
		{"NFC", "\u1100\u1161\u11a8", "\uac01"},  // Hangul L+V+T
		{"NFD", "\uac01", "\u1100\u1161\u11a8"},  // and back
		{"NFC", "\u212b", "\u00c5"},              // ANGSTROM SIGN: singleton
		{"NFC", "\u2126", "\u03a9"},              // OHM SIGN: singleton
		{"NFC", "s\u0307\u0323", "\u1e69"},       // marks reordered, then composed
		{"NFD", "\u1e69", "s\u0323\u0307"},       // dot below (220) before dot above (230)
		{"NFC", "\u0958", "\u0915\u093c"},        // composition exclusion
		{"NFC", "a\u0308\u0301", "\u00e4\u0301"}, // second mark does not compose with ä
		{"NFC", "\u0301a", "\u0301a"},            // leading mark
		{"NFKC", "\ufb01", "fi"},                 // ligature
		{"NFKD", "\u2460", "1"},                  // circled digit
		{"NFKC", "\uff76\uff9e", "\u30ac"},       // half-width kana + voiced mark
		{"NFC", "plain ASCII", "plain ASCII"},
		// Data of characters newer than the reference's tables is left out
		// (gen_unorm.py, REFERENCE_LACKS_*); the values are HF tokenizers'.
		{"NFKC", "\u32ff", "\u32ff"},                            // SQUARE ERA NAME REIWA (12.1): Python gives 令和
		{"NFKC", "\U0001fbf07", "\U0001fbf07"},                  // SEGMENTED DIGIT ZERO (13.0): Python gives 0
		{"NFD", "\U00011938", "\U00011938"},                     // DIVES AKURU VOWEL SIGN O (13.0) stays whole
		{"NFC", "\U00011935\U00011930", "\U00011935\U00011930"}, // and its parts do not compose
		{"NFD", "a\u0301\u1ac0", "a\u0301\u1ac0"},               // U+1AC0 (14.0, class 220 in Python) is class 0: no reordering
	}
	for _, tc := range tests {
		u := unicodeNorm{compat: tc.form[2] == 'K', compose: tc.form[len(tc.form)-1] == 'C'}
		if got := u.normalize(tc.in); got != tc.want {
			t.Errorf("%s(%+q) = %+q, want %+q", tc.form, tc.in, got, tc.want)
		}
	}
}
