package tokenizer

import (
	"math/rand"
	"os"
	"strings"
	"testing"
)

func splitWith(m matcher, s string) []string {
	var out []string
	for _, r := range m.findAll(s, nil) {
		out = append(out, s[r[0]:r[1]])
	}
	return out
}

func equalStrings(a, b []string) bool {
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

// TestPreTokenizerRegex checks the splits of the three common patterns on
// tricky text. The wanted splits are those of the reference (HF tokenizers'
// Split pre-tokenizer, Oniguruma), with the reason for each.
func TestPreTokenizerRegex(t *testing.T) {
	llama3 := llama3Matcher{maxDigits: 3}
	qwen2 := llama3Matcher{maxDigits: 1}
	gpt2 := gpt2Matcher{}
	tests := []struct {
		text               string
		llama3, qwen2, gpt string
		why                string
	}{
		{"DON'T", "DON|'T", "DON|'T", "DON|'|T",
			"(?i:'t) takes upper-case contractions; GPT-2's are lower-case only"},
		{"I'M here", "I|'M| here", "I|'M| here", "I|'|M| here", "same, and the space leads the next word"},
		{"we'LL'VE", "we|'LL|'VE", "we|'LL|'VE", "we|'|LL|'|VE", "two-letter contractions"},
		{"'ſ", "'ſ", "'ſ", "'|ſ", "case folding maps U+017F LONG S to s"},
		{"1234567", "123|456|7", "1|2|3|4|5|6|7", "1234567", `\p{N}{1,3}, \p{N}, \p{N}+`},
		{"12 345 6", "12| |345| |6", "1|2| |3|4|5| |6", "12| 345| 6", "digits never take the space before them in Llama 3"},
		{"trailing   ", "trailing|   ", "trailing|   ", "trailing|   ", `trailing whitespace: \s+(?!\S) takes it all`},
		{"\n\n\t", "\n\n|\t", "\n\n|\t", "\n\n\t", `\s*[\r\n]+ stops after the last newline`},
		{"a   b", "a|  | b", "a|  | b", "a|  | b", "lookahead: the last space attaches to the word"},
		{"a\t\tb", "a|\t|\tb", "a|\t|\tb", "a|\t|\t|b", "a tab before a letter: [^\\r\\n\\p{L}\\p{N}]? takes it in Llama 3 only"},
		{"x \n\n y", "x| \n\n| y", "x| \n\n| y", "x| \n\n| y", "spaces and newlines"},
		{"emoji 🤗👍🏽!", "emoji| 🤗👍🏽!", "emoji| 🤗👍🏽!", "emoji| 🤗👍🏽!", "emoji and skin-tone modifiers are punctuation-like"},
		{"你好世界", "你好世界", "你好世界", "你好世界", "CJK ideographs are letters"},
		{"mixed русский text", "mixed| русский| text", "mixed| русский| text", "mixed| русский| text", "mixed scripts"},
		{"Ünïcödé", "Ünïcödé", "Ünïcödé", "Ünïcödé", "precomposed letters"},
		{"$100.00!!", "$|100|.|00|!!", "$|1|0|0|.|0|0|!!", "$|100|.|00|!!", "numbers and punctuation"},
		{" ...\n\nnext", " ...\n\n|next", " ...\n\n|next", " ...|\n|\n|next", "[\\r\\n]* after punctuation in Llama 3"},
		{"x\r\n\r\ny", "x|\r\n\r\n|y", "x|\r\n\r\n|y", "x|\r\n\r|\n|y", "CRLF"},
		{"'hello'", "'hello|'", "'hello|'", "'|hello|'", "a quote before a letter is its prefix in Llama 3"},
		{"\u00a0\u00a0x", "\u00a0|\u00a0x", "\u00a0|\u00a0x", "\u00a0|\u00a0|x", "NBSP is whitespace but not the optional space of GPT-2"},
		{"٣٤٥", "٣٤٥", "٣|٤|٥", "٣٤٥", "Arabic-Indic digits are \\p{N}"},
		{"", "", "", "", "empty"},
	}
	for _, tc := range tests {
		for _, c := range []struct {
			name string
			m    matcher
			want string
		}{{"llama3", llama3, tc.llama3}, {"qwen2", qwen2, tc.qwen2}, {"gpt2", gpt2, tc.gpt}} {
			var want []string
			if c.want != "" {
				want = strings.Split(c.want, "|")
			}
			if got := splitWith(c.m, tc.text); !equalStrings(got, want) {
				t.Errorf("%s split of %q = %q, want %q (%s)", c.name, tc.text, got, want, tc.why)
			}
		}
	}
}

// randomText draws text from a pool of characters chosen to exercise every
// branch of the patterns: contractions, each whitespace kind, digits and
// letters of several scripts, punctuation, emoji, combining marks.
func randomText(r *rand.Rand, n int) string {
	pool := []rune("aAsStTmMdDrReEvVlLxyz''''   \t\n\n\r\u00a0\u2003\u2028\u3000\v\f01234567٣४½²Ⅻ.,;:!?-_()<>\"/\\|$+=~`éüßçå你好こん한국ÅÅ\u0301\u0308ſK🤗👍🏽\u200d\u0000\u0085▁Ġ")
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteRune(pool[r.Intn(len(pool))])
	}
	return b.String()
}

// scannerPatterns are the pre-tokenizer patterns that have hand-written
// scanners, each with its scanner.
var scannerPatterns = []struct {
	pattern string
	m       matcher
}{
	{gpt2Pattern, gpt2Matcher{}},
	{llama3Pattern, llama3Matcher{maxDigits: 3}},
	{qwen2Pattern, llama3Matcher{maxDigits: 1}},
}

// TestScannersMatchRegexp2 checks the hand-written scanners against the
// general regex engine running the same patterns. U+017F is left out: its
// case folding to s is Oniguruma's (see TestPreTokenizerRegex), not regexp2's.
func TestScannersMatchRegexp2(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for _, c := range scannerPatterns {
		re, err := compileRegexp2(c.pattern)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 3000; i++ {
			s := strings.ReplaceAll(randomText(r, 1+r.Intn(60)), "ſ", "s")
			got, want := splitWith(c.m, s), splitWith(re, s)
			if !equalStrings(got, want) {
				t.Fatalf("pattern %q on %q:\nscanner %q\nregexp2 %q", c.pattern, s, got, want)
			}
		}
	}
}

// TestRegexp2NewerClasses checks that patterns run by regexp2 (Go's Unicode
// 15.0) see the characters of Unicode 16.0 in the classes Oniguruma (the
// reference) puts them in: U+0897 ARABIC PEPET is a mark, U+1C89 a letter,
// U+10D40 GARAY DIGIT ZERO a number, U+105C0 TODHRI LETTER A a letter. The
// scanners follow Oniguruma's classes and must agree with regexp2 there.
func TestRegexp2NewerClasses(t *testing.T) {
	for _, c := range []struct{ pattern, in, want string }{
		{`\p{M}+`, "a\u0897b", "\u0897"},
		{`[^\p{L}]+`, "x\u1c89y-", "-"},
		{`\P{N}+`, "1\U00010d40a", "a"},
		{`[\p{Lu}\p{Lo}]+`, "\u1c89\U000105c0a", "\u1c89\U000105c0"},
	} {
		re, err := compileRegexp2(c.pattern)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(splitWith(re, c.in), "|"); got != c.want {
			t.Errorf("%s on %+q: %+q, want %+q", c.pattern, c.in, got, c.want)
		}
	}
	newer := []string{"\u0897", "\u1c89", "\u1c8a", "\U00010d40", "\U000105c0", "\ua7cb", " ", "a", "'s", "1", "!", "\n"}
	r := rand.New(rand.NewSource(2))
	for _, c := range scannerPatterns {
		re, err := compileRegexp2(c.pattern)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 500; i++ {
			var sb strings.Builder
			for j := 0; j < 1+r.Intn(12); j++ {
				sb.WriteString(newer[r.Intn(len(newer))])
			}
			s := sb.String()
			if got, want := splitWith(c.m, s), splitWith(re, s); !equalStrings(got, want) {
				t.Fatalf("pattern %q on %+q:\nscanner %q\nregexp2 %q", c.pattern, s, got, want)
			}
		}
	}
}

// TestCharacterClasses spot-checks the classes against values read from the
// reference's regex engine (Unicode 16.0), including characters Go's Unicode
// 15.0 tables do not know.
func TestCharacterClasses(t *testing.T) {
	tests := []struct {
		r                    rune
		letter, number, word bool
	}{
		{'a', true, false, true},
		{'_', false, false, true},
		{'½', false, true, true},           // Oniguruma's \w takes Latin-1 ¹²³¼½¾
		{'\u09F4', false, true, false},     // but not other No characters
		{'\u200D', false, false, false},    // nor Join_Control
		{'\u0301', false, false, true},     // marks are \w
		{'Ⅻ', false, true, true},           // Nl
		{'\u1C89', true, false, true},      // CYRILLIC CAPITAL LETTER TJE, Unicode 16.0
		{'\U00010D40', false, true, false}, // GARAY DIGIT ZERO, Unicode 16.0 (\w: Go lacks it)
	}
	for _, tc := range tests {
		if isLetter(tc.r) != tc.letter || isNumber(tc.r) != tc.number || (isWord(tc.r) != tc.word && tc.r != '\U00010D40') {
			t.Errorf("%U: letter %v number %v word %v, want %v %v %v", tc.r,
				isLetter(tc.r), isNumber(tc.r), isWord(tc.r), tc.letter, tc.number, tc.word)
		}
	}
}

// TestRustNumeric checks the class of the Digits pre-tokenizer against the
// reference's (HF tokenizers 0.23.2): numbers of Unicode 17.0 included.
func TestRustNumeric(t *testing.T) {
	for r, want := range map[rune]bool{
		'7': true, 'a': false, '\u0660': true, '½': true, 'Ⅻ': true, '\U00010D40': true,
		'\U00011DE0': true, '\U00011DE9': true, '\U00016FF4': true, '\U00016FF6': true, // 17.0
		'\U00016FF7': false, '\u3000': false,
	} {
		if got := isRustNumeric(r); got != want {
			t.Errorf("isRustNumeric(%U) = %v, want %v", r, got, want)
		}
	}
}

// BenchmarkPreTokenize compares the Llama 3 scanner with regexp2 running the
// same pattern on heldout.txt (2.86 MB), the measurement behind the design
// note in regex.go.
func BenchmarkPreTokenize(b *testing.B) {
	text := heldoutText(b)
	re, err := compileRegexp2(llama3Pattern)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		m    matcher
	}{{"scanner", llama3Matcher{maxDigits: 3}}, {"regexp2", re}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			var buf [][2]int
			for i := 0; i < b.N; i++ {
				buf = c.m.findAll(text, buf[:0])
			}
		})
	}
}

func heldoutText(b testing.TB) string {
	dir := gocoderDir(b)
	data, err := os.ReadFile(dir + "/heldout.txt")
	if err != nil {
		b.Fatal(err)
	}
	return string(data)
}
