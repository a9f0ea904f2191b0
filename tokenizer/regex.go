package tokenizer

import (
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// Pre-tokenizer regexes.
//
// HF tokenizers compiles Split and ByteLevel regexes with Oniguruma. Two
// families of pattern cover nearly every byte-level LLM tokenizer, and both
// need a negative lookahead (\s+(?!\S)) that Go's regexp lacks:
//
//   - gpt2Pattern, hard-coded in HF's ByteLevel pre-tokenizer (GPT-2, RoBERTa,
//     StarCoder, Falcon, Phi-2, and this repository's gocoder checkpoint);
//   - llama3Pattern (tiktoken cl100k_base: Llama 3, GPT-4) and qwen2Pattern
//     (the same with single digits: Qwen2, Qwen2.5, Qwen3).
//
// These are matched by hand-written scanners (gpt2Matcher, llama3Matcher):
// each alternative of the pattern becomes a branch on the character class of
// one or two runes, and the lookahead becomes "give back the last rune of a
// whitespace run followed by a non-space". Any other pattern goes to
// github.com/dlclark/regexp2, a backtracking engine with lookaround and
// \p{..} classes. Tests check the scanners against regexp2 on random and
// tricky text and against ids produced by the reference.
//
// Measured on this repository's 2-core machine (BenchmarkPreTokenize,
// heldout.txt, 2.86 MB of Go source, several runs): the Llama 3 scanner
// splits the text in 50-75 ms (38-58 MB/s), regexp2 on the same pattern in
// 0.55-0.67 s (4-5 MB/s), so the scanners, 12x faster, are worth their 200
// lines on the hot path of every prompt. They
// also follow Oniguruma where regexp2 (which follows .NET) does not: (?i)
// folds U+017F LONG S to s, and \p{L}/\p{N} are Unicode 16.0. For other
// patterns, onigToDotNet rewrites \w to Oniguruma's class and adds to each
// \p{Cat} the code points Oniguruma's Unicode 16.0 has there and Go's 15.0
// lacks (onigclass_tables.go, generated from the reference's own classes by
// gen_onigclass.js and gen_onigclass.go); remaining differences between the
// engines are possible on rare characters.
const (
	gpt2Pattern   = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
	llama3Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	qwen2Pattern  = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// regexTimeout bounds one regexp2 match so that a hostile pattern with
// catastrophic backtracking cannot hang an encode; the text after a timeout
// is treated as unmatched.
const regexTimeout = 2 * time.Second

// matcher finds successive non-overlapping leftmost matches of a pattern.
type matcher interface {
	// findAll appends the [start, end) byte ranges of all matches in s.
	findAll(s string, dst [][2]int) [][2]int
}

// compilePattern returns the matcher for a Split/Replace pattern: a literal
// string ({"String": ...}) or a regex ({"Regex": ...}).
func compilePattern(p string, isRegex bool) (matcher, error) {
	if !isRegex {
		return literalMatcher(p), nil
	}
	switch p {
	case gpt2Pattern:
		return gpt2Matcher{}, nil
	case llama3Pattern:
		return llama3Matcher{maxDigits: 3}, nil
	case qwen2Pattern:
		return llama3Matcher{maxDigits: 1}, nil
	}
	return compileRegexp2(p)
}

func compileRegexp2(p string) (matcher, error) {
	re, err := regexp2.Compile(onigToDotNet(p), regexp2.None)
	if err != nil {
		return nil, err
	}
	re.MatchTimeout = regexTimeout
	return &regexp2Matcher{re: re}, nil
}

// onigNewerClass returns the code points onigNewer adds to the category cat,
// as the body of a character class ("" when none).
func onigNewerClass(cat string) string {
	var b strings.Builder
	for _, r := range onigNewer[cat] {
		b.WriteRune(r[0])
		if r[1] > r[0] {
			b.WriteByte('-')
			b.WriteRune(r[1])
		}
	}
	return b.String()
}

// onigWordClass is the body of a character class equal to Oniguruma's \w:
// letters, marks, decimal and letter numbers, connector punctuation, and
// the Latin-1 digits ¹²³ and fractions ¼½¾ (regexp2, like .NET, leaves out
// marks other than Mn, letter numbers and those Latin-1 characters).
const onigWordClass = `\p{L}\p{M}\p{Nd}\p{Nl}\p{Pc}\u00B2\u00B3\u00B9\u00BC-\u00BE`

// onigToDotNet rewrites the constructs whose meaning differs between
// Oniguruma and regexp2: \w (in and out of brackets), \W (outside), and
// \p{Cat} (in and out) and \P{Cat} (outside), to which the code points of
// Oniguruma's newer Unicode tables are added (onigNewer).
func onigToDotNet(p string) string {
	var b strings.Builder
	depth := 0
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '\\' && i+1 < len(p):
			switch n := p[i+1]; {
			case (n == 'p' || n == 'P') && strings.HasPrefix(p[i+2:], "{") && strings.Contains(p[i+2:], "}"):
				end := i + 2 + strings.IndexByte(p[i+2:], '}')
				class, extra := p[i:end+1], onigNewerClass(p[i+3:end])
				switch {
				case extra == "" || (n == 'P' && depth > 0):
					b.WriteString(class)
				case depth > 0:
					b.WriteString(class + extra)
				case n == 'p':
					b.WriteString("[" + class + extra + "]")
				default:
					b.WriteString("[^\\p" + class[2:] + extra + "]")
				}
				i = end
				continue
			case n == 'w' && depth > 0:
				b.WriteString(onigWordClass)
			case n == 'w':
				b.WriteString("[" + onigWordClass + "]")
			case n == 'W' && depth == 0:
				b.WriteString("[^" + onigWordClass + "]")
			default:
				b.WriteByte(c)
				b.WriteByte(n)
			}
			i++
			continue
		case c == '[':
			depth++
		case c == ']' && depth > 0:
			depth--
		}
		b.WriteByte(c)
	}
	return b.String()
}

// Character classes of the two hand-written scanners.
const (
	clsOther  uint8 = iota // [^\s\p{L}\p{N}]
	clsLetter              // \p{L}
	clsNumber              // \p{N}
	clsSpace               // \s (Unicode White_Space, as in Oniguruma)
)

var asciiClass = func() (t [utf8.RuneSelf]uint8) {
	for r := rune(0); r < utf8.RuneSelf; r++ {
		t[r] = classOf(r)
	}
	return t
}()

func classOf(r rune) uint8 {
	switch {
	case isLetter(r):
		return clsLetter
	case isNumber(r):
		return clsNumber
	case unicode.IsSpace(r):
		return clsSpace
	}
	return clsOther
}

func class(r rune) uint8 {
	if r < utf8.RuneSelf {
		return asciiClass[r]
	}
	return classOf(r)
}

// isLetter is \p{L} of the reference: Go's tables are Unicode 15.0 while
// Oniguruma (and so HF tokenizers) uses 16.0; unicode16Letter holds the
// difference, which a test checks against the reference's classes.
func isLetter(r rune) bool {
	return unicode.IsLetter(r) || (r >= 0x1C89 && unicode.Is(unicode16Letter, r))
}

// isNumber is \p{N} of the reference (see isLetter).
func isNumber(r rune) bool {
	return unicode.IsNumber(r) || (r >= 0x10D40 && unicode.Is(unicode16Number, r))
}

// isRustNumeric is Rust's char::is_numeric (Nd, Nl, No of Unicode 17.0),
// which HF's Digits pre-tokenizer splits on: \p{N} of Oniguruma's 16.0 and
// the numbers 17.0 added, all of them, read from the reference's Digits
// over every code point.
func isRustNumeric(r rune) bool {
	return isNumber(r) || (r >= 0x11DE0 && r <= 0x11DE9) || (r >= 0x16FF4 && r <= 0x16FF6)
}

// isWord is Oniguruma's \w (see onigWordClass), checked against the
// reference's classes by TestCharacterClasses.
func isWord(r rune) bool {
	if r < utf8.RuneSelf {
		return r == '_' || ('0' <= r && r <= '9') || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z')
	}
	if r <= 0xFF {
		return r == 0xB2 || r == 0xB3 || r == 0xB9 || (r >= 0xBC && r <= 0xBE) || isLetter(r)
	}
	return isLetter(r) || unicode.IsMark(r) || unicode.Is(unicode.Nd, r) || unicode.Is(unicode.Pc, r) ||
		unicode.Is(unicode.Nl, r) || unicode.Is(unicode.Other_Alphabetic, r)
}

// unicode16Letter and unicode16Number are the code points that Unicode 16.0
// added to \p{L} and \p{N} over Go's Unicode 15.0 tables.
var unicode16Letter = &unicode.RangeTable{
	R16: []unicode.Range16{
		{0x1C89, 0x1C8A, 1}, {0xA7CB, 0xA7CD, 1}, {0xA7DA, 0xA7DC, 1},
	},
	R32: []unicode.Range32{
		{0x105C0, 0x105F3, 1}, {0x10D4A, 0x10D65, 1}, {0x10D6F, 0x10D85, 1},
		{0x10EC2, 0x10EC4, 1}, {0x11380, 0x11389, 1}, {0x1138B, 0x1138B, 1},
		{0x1138E, 0x1138E, 1}, {0x11390, 0x113B5, 1}, {0x113B7, 0x113B7, 1},
		{0x113D1, 0x113D1, 1}, {0x113D3, 0x113D3, 1}, {0x11BC0, 0x11BE0, 1},
		{0x13460, 0x143FA, 1}, {0x16100, 0x1611D, 1}, {0x16D40, 0x16D6C, 1},
		{0x18CFF, 0x18CFF, 1}, {0x1E5D0, 0x1E5ED, 1}, {0x1E5F0, 0x1E5F0, 1},
		{0x2EBF0, 0x2EE5D, 1},
	},
}

var unicode16Number = &unicode.RangeTable{
	R32: []unicode.Range32{
		{0x10D40, 0x10D49, 1}, {0x116D0, 0x116E3, 1}, {0x11BF0, 0x11BF9, 1},
		{0x16130, 0x16139, 1}, {0x16D70, 0x16D79, 1}, {0x1CCF0, 0x1CCF9, 1},
		{0x1E5F1, 0x1E5FA, 1},
	},
}

// decodeAt returns the rune at byte i and its size; callers pass valid UTF-8.
func decodeAt(s string, i int) (rune, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(s[i:])
}

// runOf returns the end of the run of runes of class c starting at i.
func runOf(s string, i int, c uint8) int {
	for i < len(s) {
		r, n := decodeAt(s, i)
		if class(r) != c {
			break
		}
		i += n
	}
	return i
}

// spaceTail matches `\s+(?!\S)|\s+` at i, where s[i] is whitespace and end is
// the end of the whitespace run: the whole run at the end of the text, else
// the run less its last rune (which then leads the next word), else one rune.
func spaceTail(s string, i, end int) int {
	if end == len(s) {
		return end
	}
	_, n := utf8.DecodeLastRuneInString(s[i:end])
	if end-n > i {
		return end - n
	}
	return end
}

// gpt2Matcher scans gpt2Pattern.
type gpt2Matcher struct{}

func (gpt2Matcher) findAll(s string, dst [][2]int) [][2]int {
	for i := 0; i < len(s); {
		j := gpt2MatchAt(s, i)
		dst = append(dst, [2]int{i, j})
		i = j
	}
	return dst
}

func gpt2MatchAt(s string, i int) int {
	// 's|'t|'re|'ve|'m|'ll|'d (case-sensitive)
	if s[i] == '\'' && i+1 < len(s) {
		switch s[i+1] {
		case 's', 't', 'm', 'd':
			return i + 2
		case 'r', 'v':
			if i+2 < len(s) && s[i+2] == 'e' {
				return i + 3
			}
		case 'l':
			if i+2 < len(s) && s[i+2] == 'l' {
				return i + 3
			}
		}
	}
	r, n := decodeAt(s, i)
	c := class(r)
	// ` ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+` with the optional space taken.
	if r == ' ' && i+1 < len(s) {
		r2, n2 := decodeAt(s, i+1)
		if c2 := class(r2); c2 != clsSpace {
			return runOf(s, i+1+n2, c2)
		}
	}
	if c != clsSpace {
		return runOf(s, i+n, c)
	}
	return spaceTail(s, i, runOf(s, i+n, clsSpace))
}

// llama3Matcher scans llama3Pattern (maxDigits 3) and qwen2Pattern (1).
type llama3Matcher struct {
	maxDigits int
}

func (m llama3Matcher) findAll(s string, dst [][2]int) [][2]int {
	for i := 0; i < len(s); {
		j := m.matchAt(s, i)
		dst = append(dst, [2]int{i, j})
		i = j
	}
	return dst
}

// contraction matches (?i:'s|'t|'re|'ve|'m|'ll|'d) at i (s[i] == '\”).
// Oniguruma's case folding also maps U+017F LATIN SMALL LETTER LONG S to s.
func contraction(s string, i int) int {
	if i+1 >= len(s) {
		return 0
	}
	lower := func(b byte) byte { return b | 0x20 }
	switch lower(s[i+1]) {
	case 's', 't', 'm', 'd':
		if s[i+1] < utf8.RuneSelf && isASCIILetter(s[i+1]) {
			return i + 2
		}
	case 'r', 'v':
		if isASCIILetter(s[i+1]) && i+2 < len(s) && lower(s[i+2]) == 'e' {
			return i + 3
		}
	case 'l':
		if isASCIILetter(s[i+1]) && i+2 < len(s) && lower(s[i+2]) == 'l' {
			return i + 3
		}
	}
	if strings.HasPrefix(s[i+1:], "\u017f") {
		return i + 1 + len("\u017f")
	}
	return 0
}

func isASCIILetter(b byte) bool { return ('a' <= b && b <= 'z') || ('A' <= b && b <= 'Z') }

func (m llama3Matcher) matchAt(s string, i int) int {
	if s[i] == '\'' {
		if j := contraction(s, i); j > 0 {
			return j
		}
	}
	r, n := decodeAt(s, i)
	c := class(r)
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if c == clsLetter {
		return runOf(s, i+n, clsLetter)
	}
	if c != clsNumber && r != '\r' && r != '\n' && i+n < len(s) {
		if r2, n2 := decodeAt(s, i+n); class(r2) == clsLetter {
			return runOf(s, i+n+n2, clsLetter)
		}
	}
	// \p{N}{1,3}
	if c == clsNumber {
		j := i + n
		for k := 1; k < m.maxDigits && j < len(s); k++ {
			r2, n2 := decodeAt(s, j)
			if class(r2) != clsNumber {
				break
			}
			j += n2
		}
		return j
	}
	// ` ?[^\s\p{L}\p{N}]+[\r\n]*`
	if r == ' ' && i+1 < len(s) {
		if r2, n2 := decodeAt(s, i+1); class(r2) == clsOther {
			return newlines(s, runOf(s, i+1+n2, clsOther))
		}
	}
	if c == clsOther {
		return newlines(s, runOf(s, i+n, clsOther))
	}
	// \s*[\r\n]+ : the whitespace run up to and including its last \r or \n.
	end := runOf(s, i+n, clsSpace)
	if k := strings.LastIndexAny(s[i:end], "\r\n"); k >= 0 {
		return i + k + 1
	}
	// \s+(?!\S)|\s+
	return spaceTail(s, i, end)
}

// newlines matches [\r\n]* at i.
func newlines(s string, i int) int {
	for i < len(s) && (s[i] == '\r' || s[i] == '\n') {
		i++
	}
	return i
}

// literalMatcher matches a fixed string ({"String": ...} patterns); the
// empty string never matches, as in HF.
type literalMatcher string

func (m literalMatcher) findAll(s string, dst [][2]int) [][2]int {
	if m == "" {
		return dst
	}
	for i := 0; ; {
		k := strings.Index(s[i:], string(m))
		if k < 0 {
			return dst
		}
		dst = append(dst, [2]int{i + k, i + k + len(m)})
		i += k + len(m)
	}
}

// runeMatcher matches every single rune for which f is true.
type runeMatcher func(rune) bool

func (f runeMatcher) findAll(s string, dst [][2]int) [][2]int {
	for i := 0; i < len(s); {
		r, n := decodeAt(s, i)
		if f(r) {
			dst = append(dst, [2]int{i, i + n})
		}
		i += n
	}
	return dst
}

// regexp2Matcher runs any other pattern with regexp2, which works on runes;
// match positions are mapped back to byte offsets.
type regexp2Matcher struct {
	re *regexp2.Regexp
}

func (m *regexp2Matcher) findAll(s string, dst [][2]int) [][2]int {
	if s == "" {
		return dst
	}
	runes := make([]rune, 0, len(s))
	offs := make([]int, 0, len(s)+1)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		runes = append(runes, r)
		offs = append(offs, i)
		i += n
	}
	offs = append(offs, len(s))
	mt, err := m.re.FindRunesMatch(runes)
	for mt != nil && err == nil {
		dst = append(dst, [2]int{offs[mt.Index], offs[mt.Index+mt.Length]})
		mt, err = m.re.FindNextMatch(mt)
	}
	return dst
}
