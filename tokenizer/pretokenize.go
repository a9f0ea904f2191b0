package tokenizer

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// piece is one split of the input on its way through the pipeline, HF's
// Split of a PreTokenizedString: text, and the id when the split is an added
// token (which later stages leave alone).
type piece struct {
	s     string
	id    int32 // added-token id, or -1 for text still to be tokenized
	first bool  // starts at offset 0 of the input (Metaspace prepend_scheme "first")
}

// preTokenizer is one HF pre-tokenizer: it splits (and may rewrite) every
// text piece, appending the results to dst; added-token pieces pass through.
// Empty pieces are dropped, as PreTokenizedString::split does.
type preTokenizer interface {
	preTokenize(dst, src []piece) []piece
}

// splitBehavior is HF's SplitDelimiterBehavior: what happens to a match.
type splitBehavior uint8

const (
	splitRemoved            splitBehavior = iota // the match is dropped
	splitIsolated                                // the match is its own piece
	splitMergedWithPrevious                      // the match joins the piece before it
	splitMergedWithNext                          // the match joins the piece after it
	splitContiguous                              // consecutive matches form one piece
)

func parseBehavior(n jnode) (splitBehavior, error) {
	s, err := n.str()
	if err != nil {
		return 0, err
	}
	switch s {
	case "Removed":
		return splitRemoved, nil
	case "Isolated":
		return splitIsolated, nil
	case "MergedWithPrevious":
		return splitMergedWithPrevious, nil
	case "MergedWithNext":
		return splitMergedWithNext, nil
	case "Contiguous":
		return splitContiguous, nil
	}
	return 0, n.errorf("unknown behavior %q (want Removed, Isolated, MergedWithPrevious, MergedWithNext or Contiguous)", s)
}

// span is a run of a piece's text and whether the pattern matched it.
type span struct {
	start, end int
	match      bool
}

// spansOf is Pattern::find_matches: the matches and the gaps between them,
// covering s, with the match flag inverted when invert is set.
func spansOf(s string, matches [][2]int, invert bool, dst []span) []span {
	prev := 0
	for _, m := range matches {
		if m[0] != prev {
			dst = append(dst, span{prev, m[0], invert})
		}
		dst = append(dst, span{m[0], m[1], !invert})
		prev = m[1]
	}
	if prev != len(s) {
		dst = append(dst, span{prev, len(s), invert})
	}
	return dst
}

// splitSpans is NormalizedString::split: it folds the spans by behavior and
// appends the resulting non-empty pieces of p to dst.
func splitSpans(p piece, spans []span, b splitBehavior, dst []piece) []piece {
	emit := func(start, end int) {
		if end > start {
			dst = append(dst, piece{s: p.s[start:end], id: -1, first: p.first && start == 0})
		}
	}
	switch b {
	case splitIsolated:
		for _, sp := range spans {
			emit(sp.start, sp.end)
		}
	case splitRemoved:
		for _, sp := range spans {
			if !sp.match {
				emit(sp.start, sp.end)
			}
		}
	case splitContiguous, splitMergedWithPrevious:
		var acc [][2]int
		prevMatch := false
		for _, sp := range spans {
			join := sp.match == prevMatch
			if b == splitMergedWithPrevious {
				join = sp.match && !prevMatch
			}
			if join && len(acc) > 0 {
				acc[len(acc)-1][1] = sp.end
			} else {
				acc = append(acc, [2]int{sp.start, sp.end})
			}
			prevMatch = sp.match
		}
		for _, a := range acc {
			emit(a[0], a[1])
		}
	case splitMergedWithNext:
		var acc [][2]int // built right to left
		prevMatch := false
		for i := len(spans) - 1; i >= 0; i-- {
			sp := spans[i]
			if sp.match && !prevMatch && len(acc) > 0 {
				acc[len(acc)-1][0] = sp.start
			} else {
				acc = append(acc, [2]int{sp.start, sp.end})
			}
			prevMatch = sp.match
		}
		for i := len(acc) - 1; i >= 0; i-- {
			emit(acc[i][0], acc[i][1])
		}
	}
	return dst
}

// splitPre is the Split pre-tokenizer and the splitting step of others.
type splitPre struct {
	m        matcher
	behavior splitBehavior
	invert   bool
}

func (sp *splitPre) preTokenize(dst, src []piece) []piece {
	var mbuf [][2]int
	var sbuf []span
	for _, p := range src {
		if p.id >= 0 {
			dst = append(dst, p)
			continue
		}
		if cap(mbuf) < len(p.s)/3 {
			mbuf = make([][2]int, 0, len(p.s)/3+8)
		}
		mbuf = sp.m.findAll(p.s, mbuf[:0])
		if sp.behavior == splitIsolated && !sp.invert {
			// Fast path: pieces are the matches and the gaps, in order.
			prev := 0
			for _, m := range mbuf {
				if m[0] > prev {
					dst = append(dst, piece{s: p.s[prev:m[0]], id: -1, first: p.first && prev == 0})
				}
				if m[1] > m[0] {
					dst = append(dst, piece{s: p.s[m[0]:m[1]], id: -1, first: p.first && m[0] == 0})
				}
				prev = m[1]
			}
			if prev < len(p.s) {
				dst = append(dst, piece{s: p.s[prev:], id: -1, first: p.first && prev == 0})
			}
			continue
		}
		sbuf = spansOf(p.s, mbuf, sp.invert, sbuf[:0])
		dst = splitSpans(p, sbuf, sp.behavior, dst)
	}
	return dst
}

// byteLevelPre is the ByteLevel pre-tokenizer: optional prefix space, the
// GPT-2 regex split, then every byte mapped to its printable stand-in.
type byteLevelPre struct {
	addPrefixSpace bool
	useRegex       bool
}

func (bl *byteLevelPre) preTokenize(dst, src []piece) []piece {
	// All mapped text goes into one buffer, and pieces are slices of it.
	n := 0
	for _, p := range src {
		if p.id < 0 {
			n += 2*len(p.s) + 2
		}
	}
	var sb strings.Builder
	sb.Grow(n)
	type span struct {
		start, end int
		first      bool
	}
	spans := make([]span, 0, len(src)+n/6)
	var mbuf [][2]int
	start := len(dst)
	for _, p := range src {
		if p.id >= 0 {
			dst = append(dst, p)
			spans = append(spans, span{-1, -1, false})
			continue
		}
		s := p.s
		if bl.addPrefixSpace && !strings.HasPrefix(s, " ") {
			s = " " + s
		}
		mbuf = mbuf[:0]
		if bl.useRegex {
			if cap(mbuf) < len(s)/3 {
				mbuf = make([][2]int, 0, len(s)/3+8)
			}
			mbuf = gpt2Matcher{}.findAll(s, mbuf)
		} else {
			mbuf = append(mbuf, [2]int{0, len(s)})
		}
		for _, m := range mbuf {
			if m[1] > m[0] {
				b := sb.Len()
				for i := m[0]; i < m[1]; i++ {
					sb.WriteString(byteToChar[s[i]])
				}
				dst = append(dst, piece{id: -1})
				spans = append(spans, span{b, sb.Len(), p.first && m[0] == 0})
			}
		}
	}
	all := sb.String()
	for i, sp := range spans {
		if sp.start >= 0 {
			dst[start+i] = piece{s: all[sp.start:sp.end], id: -1, first: sp.first}
		}
	}
	return dst
}

// metaspacePre is the Metaspace pre-tokenizer: spaces become the replacement
// character (▁), which is prepended per prepend_scheme, and the text is split
// before each replacement character.
type metaspacePre struct {
	replacement rune
	rep         string
	prepend     prependScheme
	split       bool
}

// prependScheme is Metaspace's prepend_scheme.
type prependScheme uint8

const (
	prependAlways prependScheme = iota
	prependFirst
	prependNever
)

func (ms *metaspacePre) preTokenize(dst, src []piece) []piece {
	var mbuf [][2]int
	var sbuf []span
	for _, p := range src {
		if p.id >= 0 {
			dst = append(dst, p)
			continue
		}
		s := strings.ReplaceAll(p.s, " ", ms.rep)
		if s != "" && !strings.HasPrefix(s, ms.rep) &&
			(ms.prepend == prependAlways || (ms.prepend == prependFirst && p.first)) {
			s = ms.rep + s
		}
		q := piece{s: s, id: -1, first: p.first}
		if !ms.split {
			if s != "" {
				dst = append(dst, q)
			}
			continue
		}
		mbuf = literalMatcher(ms.rep).findAll(s, mbuf[:0])
		sbuf = spansOf(s, mbuf, false, sbuf[:0])
		dst = splitSpans(q, sbuf, splitMergedWithNext, dst)
	}
	return dst
}

// sequencePre runs pre-tokenizers one after the other.
type sequencePre []preTokenizer

func (seq sequencePre) preTokenize(dst, src []piece) []piece {
	if len(seq) == 0 {
		return append(dst, src...)
	}
	cur := src
	for i, pt := range seq {
		if i == len(seq)-1 {
			return pt.preTokenize(dst, cur)
		}
		cur = pt.preTokenize(make([]piece, 0, len(cur)*2), cur)
	}
	return dst
}

// isPunctuation is HF's is_punc: ASCII punctuation or Unicode P*.
func isPunctuation(r rune) bool {
	if r < utf8.RuneSelf {
		return unicode.IsPunct(r) || unicode.IsSymbol(r)
	}
	return unicode.IsPunct(r)
}

// parsePreTokenizer decodes the "pre_tokenizer" field (non-null).
func parsePreTokenizer(n jnode, depth int) (preTokenizer, error) {
	o, typ, err := openComponent(n, depth)
	if err != nil {
		return nil, err
	}
	switch typ {
	case "ByteLevel":
		bl := &byteLevelPre{}
		if bl.addPrefixSpace, err = o.get("add_prefix_space").boolOr(true); err != nil {
			return nil, err
		}
		if bl.useRegex, err = o.get("use_regex").boolOr(true); err != nil {
			return nil, err
		}
		return bl, nil
	case "Split":
		p, isRegex, err := o.get("pattern").pattern()
		if err != nil {
			return nil, err
		}
		m, err := compilePattern(p, isRegex)
		if err != nil {
			return nil, o.get("pattern").errorf("cannot compile %q: %v", p, err)
		}
		b, err := parseBehavior(o.get("behavior"))
		if err != nil {
			return nil, err
		}
		inv, err := o.get("invert").boolOr(false)
		if err != nil {
			return nil, err
		}
		return &splitPre{m: m, behavior: b, invert: inv}, nil
	case "Metaspace":
		return parseMetaspace(o)
	case "Digits":
		ind, err := o.get("individual_digits").boolOr(false)
		if err != nil {
			return nil, err
		}
		b := splitContiguous
		if ind {
			b = splitIsolated
		}
		return &splitPre{m: runeMatcher(isRustNumeric), behavior: b}, nil
	case "Whitespace":
		// \w+|[^\w\s]+ kept, the rest removed.
		return &splitPre{m: wordOrPunctMatcher{}, behavior: splitRemoved, invert: true}, nil
	case "WhitespaceSplit":
		return &splitPre{m: runeMatcher(unicode.IsSpace), behavior: splitRemoved}, nil
	case "Punctuation":
		b := splitIsolated
		if bn := o.get("behavior"); !bn.isNull() {
			if b, err = parseBehavior(bn); err != nil {
				return nil, err
			}
		}
		return &splitPre{m: runeMatcher(isPunctuation), behavior: b}, nil
	case "CharDelimiterSplit":
		d, err := o.get("delimiter").str()
		if err != nil {
			return nil, err
		}
		if utf8.RuneCountInString(d) != 1 {
			return nil, o.get("delimiter").errorf("want one character, got %q", d)
		}
		r, _ := utf8.DecodeRuneInString(d)
		return &splitPre{m: runeMatcher(func(c rune) bool { return c == r }), behavior: splitRemoved}, nil
	case "Sequence":
		seq, err := parseList(o, "pretokenizers", depth, parsePreTokenizer)
		return sequencePre(seq), err
	}
	return nil, o.get("type").wrap(unsupported("pre_tokenizer", typ,
		"ByteLevel, Split, Metaspace, Digits, Whitespace, WhitespaceSplit, Punctuation, CharDelimiterSplit, Sequence"))
}

func parseMetaspace(o jobject) (*metaspacePre, error) {
	rep, err := o.get("replacement").str()
	if err != nil {
		return nil, err
	}
	if utf8.RuneCountInString(rep) != 1 {
		return nil, o.get("replacement").errorf("want one character, got %q", rep)
	}
	ms := &metaspacePre{rep: rep, prepend: prependAlways}
	ms.replacement, _ = utf8.DecodeRuneInString(rep)
	if sn := o.get("prepend_scheme"); !sn.isNull() {
		s, err := sn.str()
		if err != nil {
			return nil, err
		}
		switch s {
		case "always":
			ms.prepend = prependAlways
		case "first":
			ms.prepend = prependFirst
		case "never":
			ms.prepend = prependNever
		default:
			return nil, sn.errorf("unknown prepend_scheme %q (want first, always or never)", s)
		}
	}
	// Legacy files carry add_prefix_space instead: false means never.
	if an := o.get("add_prefix_space"); !an.isNull() {
		add, err := an.boolOr(true)
		if err != nil {
			return nil, err
		}
		if !add {
			if o.has("prepend_scheme") && !o.get("prepend_scheme").isNull() && ms.prepend != prependNever {
				return nil, an.errorf("add_prefix_space false does not match prepend_scheme")
			}
			ms.prepend = prependNever
		}
	}
	if ms.split, err = o.get("split").boolOr(true); err != nil {
		return nil, err
	}
	return ms, nil
}

// wordOrPunctMatcher matches \w+|[^\w\s]+ for the Whitespace pre-tokenizer.
type wordOrPunctMatcher struct{}

func (wordOrPunctMatcher) findAll(s string, dst [][2]int) [][2]int {
	for i := 0; i < len(s); {
		r, n := decodeAt(s, i)
		if unicode.IsSpace(r) {
			i += n
			continue
		}
		w := isWord(r)
		j := i + n
		for j < len(s) {
			r2, n2 := decodeAt(s, j)
			if unicode.IsSpace(r2) || isWord(r2) != w {
				break
			}
			j += n2
		}
		dst = append(dst, [2]int{i, j})
		i = j
	}
	return dst
}

// maxNesting bounds Sequence nesting in hostile files.
const maxNesting = 16
