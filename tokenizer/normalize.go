package tokenizer

import (
	"strings"
	"unicode"
)

// normalizer is one HF normalizer, applied to each text piece between added
// tokens (AddedVocabulary::extract_and_normalize).
type normalizer interface {
	normalize(s string) string
}

// prependNorm is Prepend: the string goes before any non-empty piece.
type prependNorm string

func (p prependNorm) normalize(s string) string {
	if s == "" {
		return s
	}
	return string(p) + s
}

// replaceNorm is Replace: every match of the pattern becomes content.
type replaceNorm struct {
	m       matcher
	content string
}

func (r *replaceNorm) normalize(s string) string {
	return replaceAll(r.m, s, r.content)
}

func replaceAll(m matcher, s, content string) string {
	if lm, ok := m.(literalMatcher); ok {
		if lm == "" {
			return s
		}
		return strings.ReplaceAll(s, string(lm), content)
	}
	ms := m.findAll(s, nil)
	if len(ms) == 0 {
		return s
	}
	var b strings.Builder
	prev := 0
	for _, mt := range ms {
		b.WriteString(s[prev:mt[0]])
		b.WriteString(content)
		prev = mt[1]
	}
	b.WriteString(s[prev:])
	return b.String()
}

// sequenceNorm runs normalizers in order.
type sequenceNorm []normalizer

func (seq sequenceNorm) normalize(s string) string {
	for _, n := range seq {
		s = n.normalize(s)
	}
	return s
}

// lowercaseNorm is Lowercase: Rust's char::to_lowercase on every character.
type lowercaseNorm struct{}

func (lowercaseNorm) normalize(s string) string {
	return strings.Map(func(r rune) rune {
		if r == 'İ' {
			return -1 // handled below: it lowercases to two characters
		}
		if l := unicode.ToLower(r); l != r || r < 0x1C89 {
			return l
		}
		return lowerNewer(r)
	}, strings.ReplaceAll(s, "İ", "i\u0307"))
}

// lowerNewer lowercases the capitals that the reference knows (Rust's
// Unicode 17.0) and Go's Unicode 15.0 tables do not: all of them, read from
// the reference's Lowercase normalizer over every code point.
func lowerNewer(r rune) rune {
	switch {
	case r >= 0x10D50 && r <= 0x10D65: // Garay (16.0)
		return r + 0x20
	case r >= 0x16EA0 && r <= 0x16EB8: // Beria Erfe (17.0)
		return r + 0x1B
	}
	switch r {
	case 0x1C89: // CYRILLIC CAPITAL LETTER TJE (16.0)
		return 0x1C8A
	case 0xA7CB: // LATIN CAPITAL LETTER RAMS HORN (16.0)
		return 0x0264
	case 0xA7CC, 0xA7CE, 0xA7D2, 0xA7D4, 0xA7DA: // Latin capitals of 16.0 or 17.0
		return r + 1
	case 0xA7DC: // LATIN CAPITAL LETTER LAMBDA WITH STROKE (16.0)
		return 0x019B
	}
	return r
}

// stripNorm is Strip: leading and/or trailing whitespace removed.
type stripNorm struct{ left, right bool }

func (st stripNorm) normalize(s string) string {
	if st.left {
		s = strings.TrimLeftFunc(s, unicode.IsSpace)
	}
	if st.right {
		s = strings.TrimRightFunc(s, unicode.IsSpace)
	}
	return s
}

// stripAccentsNorm is StripAccents: combining marks removed (meant to follow
// NFD, as in HF). The marks are those of the reference's Unicode tables
// (combiningMarks): Mn, Mc and Me of an older version than Go's.
type stripAccentsNorm struct{}

func (stripAccentsNorm) normalize(s string) string {
	return strings.Map(func(r rune) rune {
		if isCombiningMark(r) {
			return -1
		}
		return r
	}, s)
}

// unicodeNorm is NFC, NFD, NFKC or NFKD (see unorm.go).
type unicodeNorm struct {
	compat, compose bool
}

func (u unicodeNorm) normalize(s string) string {
	return normalizeUnicode(s, u.compat, u.compose)
}

// parseNormalizer decodes the "normalizer" field (non-null).
func parseNormalizer(n jnode, depth int) (normalizer, error) {
	o, typ, err := openComponent(n, depth)
	if err != nil {
		return nil, err
	}
	switch typ {
	case "Prepend":
		p, err := o.get("prepend").str()
		if err != nil {
			return nil, err
		}
		return prependNorm(p), nil
	case "Replace":
		m, c, err := parseReplace(o)
		if err != nil {
			return nil, err
		}
		return &replaceNorm{m: m, content: c}, nil
	case "Sequence":
		seq, err := parseList(o, "normalizers", depth, parseNormalizer)
		return sequenceNorm(seq), err
	case "Lowercase":
		return lowercaseNorm{}, nil
	case "Strip":
		l, err := o.get("strip_left").boolOr(true)
		if err != nil {
			return nil, err
		}
		r, err := o.get("strip_right").boolOr(true)
		if err != nil {
			return nil, err
		}
		return stripNorm{l, r}, nil
	case "StripAccents":
		return stripAccentsNorm{}, nil
	case "NFC":
		return unicodeNorm{compose: true}, nil
	case "NFD":
		return unicodeNorm{}, nil
	case "NFKC":
		return unicodeNorm{compat: true, compose: true}, nil
	case "NFKD":
		return unicodeNorm{compat: true}, nil
	}
	return nil, o.get("type").wrap(unsupported("normalizer", typ,
		"Prepend, Replace, Sequence, Lowercase, Strip, StripAccents, NFC, NFD, NFKC, NFKD"))
}

// openComponent checks the nesting limit and returns a component node's
// object and its "type".
func openComponent(n jnode, depth int) (jobject, string, error) {
	if depth > maxNesting {
		return jobject{}, "", n.errorf("nested more than %d deep", maxNesting)
	}
	o, err := n.object()
	if err != nil {
		return jobject{}, "", err
	}
	typ, err := o.typeName()
	return o, typ, err
}

// parseList parses the array o[key] of nested components (a "Sequence").
func parseList[T any](o jobject, key string, depth int, parse func(jnode, int) (T, error)) ([]T, error) {
	list, err := o.get(key).array()
	if err != nil {
		return nil, err
	}
	seq := make([]T, 0, len(list))
	for _, e := range list {
		x, err := parse(e, depth+1)
		if err != nil {
			return nil, err
		}
		seq = append(seq, x)
	}
	return seq, nil
}

// parseReplace parses a Replace component's pattern (string or regex) and
// replacement content.
func parseReplace(o jobject) (matcher, string, error) {
	p, isRegex, err := o.get("pattern").pattern()
	if err != nil {
		return nil, "", err
	}
	m, err := compilePattern(p, isRegex)
	if err != nil {
		return nil, "", o.get("pattern").errorf("cannot compile %q: %v", p, err)
	}
	c, err := o.get("content").str()
	return m, c, err
}
