package tokenizer

import "testing"

// TestLowercase checks the Lowercase normalizer on the reference's values
// (HF tokenizers 0.23.2), capitals newer than Go's Unicode tables included;
// over every code point it gave the reference's result when this was
// written.
func TestLowercase(t *testing.T) {
	tests := []struct{ in, want string }{
		{"ABC Straße", "abc straße"},
		{"İstanbul", "i\u0307stanbul"},                   // two characters
		{"\u1c89", "\u1c8a"},                             // CYRILLIC CAPITAL LETTER TJE (16.0)
		{"\U00010d50\U00010d65", "\U00010d70\U00010d85"}, // Garay (16.0)
		{"\U00016ea0", "\U00016ebb"},                     // Beria Erfe (17.0)
		{"\ua7cb\ua7dc\ua7cc", "\u0264\u019b\ua7cd"},
		{"\u1c8a\u0264", "\u1c8a\u0264"}, // already lowercase
	}
	for _, tc := range tests {
		if got := (lowercaseNorm{}).normalize(tc.in); got != tc.want {
			t.Errorf("Lowercase(%+q) = %+q, want %+q", tc.in, got, tc.want)
		}
	}
}

// TestStripAccents checks StripAccents on the reference's values: it removes
// the combining marks of the reference's older Unicode tables, spacing (Mc)
// and enclosing (Me) marks included, and keeps marks added since.
func TestStripAccents(t *testing.T) {
	tests := []struct{ in, want string }{
		{"cafe\u0301", "cafe"},
		{"x\u0903x", "xx"},       // DEVANAGARI SIGN VISARGA, Mc
		{"x\u20ddx", "xx"},       // COMBINING ENCLOSING CIRCLE, Me
		{"x\u1cf2x", "xx"},       // VEDIC SIGN ARDHAVISARGA: a mark then, Lo now
		{"x\u1ac0x", "x\u1ac0x"}, // a mark of Unicode 14.0: kept
		{"x\u0b55x", "x\u0b55x"}, // ORIYA SIGN OVERLINE (13.0): kept
	}
	for _, tc := range tests {
		if got := (stripAccentsNorm{}).normalize(tc.in); got != tc.want {
			t.Errorf("StripAccents(%+q) = %+q, want %+q", tc.in, got, tc.want)
		}
	}
}
