package tokenizer

import "testing"

// TestAppendLossy checks the replacement of invalid UTF-8 against what the
// reference's ByteLevel decoder (Rust String::from_utf8_lossy) gives for the
// same bytes: one U+FFFD per maximal invalid subsequence.
func TestAppendLossy(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"\xe2\x82", "\uFFFD"},                 // truncated 3-byte sequence
		{"\xf0\x9f\x98", "\uFFFD"},             // truncated 4-byte sequence
		{"\xc0\x80", "\uFFFD\uFFFD"},           // overlong: C0 is never valid
		{"\xed\xa0\x80", "\uFFFD\uFFFD\uFFFD"}, // surrogate: ED A0 is not a valid prefix
		{"\xe2\x82A", "\uFFFDA"},
		{"\xf4\x90\x80\x80", "\uFFFD\uFFFD\uFFFD\uFFFD"}, // above U+10FFFF
		{"\xffA\xc3", "\uFFFDA\uFFFD"},
		{"\xe0\x80\x80", "\uFFFD\uFFFD\uFFFD"},
		{"\xf0\x9f\x98\x80\xf0", "😀\uFFFD"},
		{"ok é", "ok é"},
	}
	for _, tc := range tests {
		if got := string(appendLossy(nil, []byte(tc.in))); got != tc.want {
			t.Errorf("appendLossy(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestByteLevelAlphabet checks the GPT-2 byte alphabet's landmarks and that
// it is a bijection.
func TestByteLevelAlphabet(t *testing.T) {
	for b, want := range map[byte]string{' ': "Ġ", '\n': "Ċ", '\t': "ĉ", 'a': "a", 0: "Ā", 0xAD: "Ń", 0xFF: "ÿ"} {
		if byteToChar[b] != want {
			t.Errorf("byteToChar[%#x] = %q, want %q", b, byteToChar[b], want)
		}
	}
	seen := map[string]bool{}
	for b := 0; b < 256; b++ {
		s := byteToChar[b]
		if seen[s] {
			t.Fatalf("%q used twice", s)
		}
		seen[s] = true
		if got := byteLevelBytes(nil, s); len(got) != 1 || got[0] != byte(b) {
			t.Fatalf("byteLevelBytes(%q) = %v, want [%d]", s, got, b)
		}
	}
	if got := string(byteLevelBytes(nil, "<|eot_id|>")); got != "<|eot_id|>" {
		t.Errorf("byteLevelBytes of an ASCII token = %q", got)
	}
	if got := string(byteLevelBytes(nil, "日本")); got != "日本" {
		t.Errorf("a token outside the alphabet is kept as its UTF-8: %q", got)
	}
}
