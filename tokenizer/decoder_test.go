package tokenizer

import "testing"

// TestDecoders checks each decoder on token lists, with HF's semantics
// (tokenizers/src/decoders).
func TestDecoders(t *testing.T) {
	tests := []struct {
		name string
		d    decoder
		in   []string
		want []string
	}{
		{"ByteLevel joins and maps bytes", byteLevelDec{}, []string{"Hello", "Ġworld", "Ċ"}, []string{"Hello world\n"}},
		{"ByteLevel lossy", byteLevelDec{}, []string{"a", "âĤ"}, []string{"a\uFFFD"}},
		{"Metaspace drops the first token's ▁", metaspaceDec{replacement: '▁', prepend: prependAlways}, []string{"▁Hey", "▁▁you"}, []string{"Hey", "  you"}},
		{"Metaspace never", metaspaceDec{replacement: '▁', prepend: prependNever}, []string{"▁Hey", "▁you"}, []string{" Hey", " you"}},
		{"ByteFallback valid", byteFallbackDec{}, []string{"a", "<0xE2>", "<0x82>", "<0xAC>", "b"}, []string{"a", "€", "b"}},
		{"ByteFallback invalid: one U+FFFD per byte", byteFallbackDec{}, []string{"<0xE2>", "<0x82>", "x"}, []string{"\uFFFD", "\uFFFD", "x"}},
		{"ByteFallback not a byte token", byteFallbackDec{}, []string{"<0xZZ>", "<0x4>", "<0x41>"}, []string{"<0xZZ>", "<0x4>", "A"}},
		{"Fuse", fuseDec{}, []string{"a", "b", "c"}, []string{"abc"}},
		{"Strip start 1 stop 2", stripDec{content: ' ', start: 1, stop: 2}, []string{"  a   ", "", " "}, []string{" a ", "", ""}},
		{"Replace", &replaceDec{m: literalMatcher("▁"), content: " "}, []string{"▁a▁b", "c"}, []string{" a b", "c"}},
		{"BPEDecoder", bpeDec{suffix: "</w>"}, []string{"hel", "lo</w>", "world</w>"}, []string{"hel", "lo ", "world"}},
		{"Sequence", sequenceDec{&replaceDec{m: literalMatcher("▁"), content: " "}, fuseDec{}, stripDec{content: ' ', start: 1}},
			[]string{"▁Hello", "▁world"}, []string{"Hello world"}},
	}
	for _, tc := range tests {
		if got := tc.d.decodeChain(tc.in); !equalStrings(got, tc.want) {
			t.Errorf("%s: decodeChain(%q) = %q, want %q", tc.name, tc.in, got, tc.want)
		}
	}
}

// TestSplitBehaviors is the example of HF's SplitDelimiterBehavior
// documentation: "the-final--countdown" split on "-".
func TestSplitBehaviors(t *testing.T) {
	tests := []struct {
		b      splitBehavior
		invert bool
		want   string
	}{
		{splitRemoved, false, "the|final|countdown"},
		{splitIsolated, false, "the|-|final|-|-|countdown"},
		{splitMergedWithPrevious, false, "the-|final-|-|countdown"},
		{splitMergedWithNext, false, "the|-final|-|-countdown"},
		{splitContiguous, false, "the|-|final|--|countdown"},
		{splitRemoved, true, "-|-|-"},
		{splitMergedWithPrevious, true, "-the|-final|-|-countdown"[1:]},
	}
	for _, tc := range tests {
		sp := &splitPre{m: literalMatcher("-"), behavior: tc.b, invert: tc.invert}
		var got []string
		for _, p := range sp.preTokenize(nil, []piece{{s: "the-final--countdown", id: -1}}) {
			got = append(got, p.s)
		}
		if g := joinBar(got); g != tc.want {
			t.Errorf("behavior %d invert %v: %s, want %s", tc.b, tc.invert, g, tc.want)
		}
	}
}

func joinBar(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += "|"
		}
		out += x
	}
	return out
}

// TestSkipSpecialNormalized checks which special tokens SkipSpecial drops:
// HF drops a token when the string it decodes as is a special token's
// content, and a special token with normalized=true decodes as its
// normalized form ("▁<s>" under a Prepend normalizer), so it is kept. Some
// Llama 2 derived tokenizer.json files mark <s> and </s> so. The ids and
// texts are the reference's (HF tokenizers 0.23.2 on testdata/spm_normspecial.json).
func TestSkipSpecialNormalized(t *testing.T) {
	tok := loadFixture(t, "spm_normspecial")
	id := func(s string) int {
		i, ok := tok.TokenToID(s)
		if !ok {
			t.Fatalf("no token %q", s)
		}
		return i
	}
	hello := tok.Encode("Hello", false)
	tests := []struct {
		ids  []int
		want string
	}{
		{append([]int{id("<s>")}, hello...), "<s> Hello"},           // "▁<s>" is no special content: kept
		{append(hello, id("<x y>"), id("<raw>")), "Hello <x y>"},    // "▁<x▁y>" kept; <raw> (normalized=false) dropped
		{[]int{id("<unk>"), id("<ctl>"), id("</s>")}, "<ctl> </s>"}, // <unk> (normalized=false) dropped
	}
	for _, tc := range tests {
		if got := tok.DecodeWith(tc.ids, DecodeOptions{SkipSpecial: true}); got != tc.want {
			t.Errorf("DecodeWith(%v, SkipSpecial) = %q, want %q", tc.ids, got, tc.want)
		}
	}
}
