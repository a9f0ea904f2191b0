package jinja

import (
	"strings"
	"unicode/utf8"
)

// segKind is the kind of a piece of template source.
type segKind int

const (
	segText    segKind = iota // literal text
	segVar                    // {{ ... }}
	segBlock                  // {% ... %}
	segComment                // {# ... #}
)

// segment is a piece of the template source after whitespace control.
type segment struct {
	kind segKind
	text string // the literal text, or the inside of the tag
	line int    // line of its first character (1-based)
}

// lexSegments splits a template into text and tags and applies Jinja's
// whitespace control with the settings HF renders with: trim_blocks=True,
// lstrip_blocks=True, keep_trailing_newline=False, and "\r\n" and "\r"
// normalized to "\n" (jinja2's newline_sequence).
func lexSegments(src string) ([]segment, error) {
	src = strings.ReplaceAll(src, "\r\n", "\n")
	src = strings.ReplaceAll(src, "\r", "\n")
	src = strings.TrimSuffix(src, "\n") // keep_trailing_newline=False drops one

	var segs []segment
	line := 1
	pos := 0
	lineStarting := true
	addText := func(s string, l int) {
		if s != "" {
			segs = append(segs, segment{kind: segText, text: s, line: l})
		}
	}
	for pos < len(src) {
		start := indexTagOpen(src, pos)
		if start < 0 {
			addText(src[pos:], line)
			break
		}
		text := src[pos:start]
		textLine := line
		line += strings.Count(text, "\n")
		open := src[start : start+2]
		kind := map[string]segKind{"{{": segVar, "{%": segBlock, "{#": segComment}[open]
		i := start + 2
		sign := byte(0)
		if i < len(src) && (src[i] == '-' || src[i] == '+') {
			sign = src[i]
			i++
		}
		// Whitespace before the tag.
		if sign == '-' {
			text = strings.TrimRightFunc(text, pyIsSpace)
		} else if sign != '+' && kind != segVar {
			lpos := strings.LastIndexByte(text, '\n') + 1
			if lpos > 0 || lineStarting {
				rest := text[lpos:]
				if rest != "" && strings.TrimFunc(rest, pyIsSpace) == "" {
					text = text[:lpos]
				}
			}
		}
		addText(text, textLine)
		tagLine := line

		// Find the end of the tag.
		var inner string
		var end int // index after the closer
		closeSign := byte(0)
		switch kind {
		case segComment:
			j := strings.Index(src[i:], "#}")
			if j < 0 {
				return nil, &Error{Line: tagLine, Msg: "unclosed comment"}
			}
			inner = src[i : i+j]
			end = i + j + 2
			if strings.HasSuffix(inner, "-") {
				closeSign = '-'
			} else if strings.HasSuffix(inner, "+") {
				closeSign = '+'
			}
		default:
			closer := "}}"
			if kind == segBlock {
				closer = "%}"
			}
			j, ok := findCloser(src, i, closer)
			if !ok {
				return nil, &Error{Line: tagLine, Msg: "unclosed tag " + open}
			}
			inner = src[i:j]
			end = j + 2
			if strings.HasSuffix(inner, "-") {
				closeSign = '-'
				inner = inner[:len(inner)-1]
			} else if strings.HasSuffix(inner, "+") && kind == segBlock {
				closeSign = '+'
				inner = inner[:len(inner)-1]
			}
		}
		line += strings.Count(src[start:end], "\n")

		// {% raw %} ... {% endraw %}: the inside is text.
		if kind == segBlock && strings.TrimSpace(inner) == "raw" {
			rs, re, rsign, ok := findEndRaw(src, end)
			if !ok {
				return nil, &Error{Line: tagLine, Msg: "unclosed {% raw %}"}
			}
			body := src[end:rs]
			if closeSign == '-' {
				body = strings.TrimLeftFunc(body, pyIsSpace)
			} else if closeSign != '+' && strings.HasPrefix(body, "\n") {
				body = body[1:]
			}
			if rsign == '-' {
				body = strings.TrimRightFunc(body, pyIsSpace)
			}
			addText(body, tagLine)
			line += strings.Count(src[end:re], "\n")
			end = re
			closeSign = 0
			inner = ""
			kind = segComment // behaves like a block end for what follows
		} else if kind != segComment {
			segs = append(segs, segment{kind: kind, text: inner, line: tagLine})
		}

		// Whitespace after the tag.
		pos = end
		lineStarting = false
		switch {
		case closeSign == '-':
			k := pos
			for k < len(src) {
				r, n := utf8.DecodeRuneInString(src[k:])
				if !pyIsSpace(r) {
					break
				}
				k += n
			}
			if k > pos {
				lineStarting = src[k-1] == '\n'
				line += strings.Count(src[pos:k], "\n")
				pos = k
			}
		case closeSign != '+' && kind != segVar:
			if pos < len(src) && src[pos] == '\n' {
				pos++
				line++
				lineStarting = true
			}
		}
	}
	return segs, nil
}

// indexTagOpen finds the next "{{", "{%" or "{#" at or after pos.
func indexTagOpen(src string, pos int) int {
	for i := pos; i+1 < len(src); i++ {
		if src[i] == '{' && (src[i+1] == '{' || src[i+1] == '%' || src[i+1] == '#') {
			return i
		}
	}
	return -1
}

// findCloser finds closer after pos, skipping string literals and, as
// jinja2's lexer does, closers inside open brackets ("{'a': {}}}" ends at
// the third brace).
func findCloser(src string, pos int, closer string) (int, bool) {
	depth := 0
	for i := pos; i < len(src); i++ {
		c := src[i]
		switch c {
		case '\'', '"':
			j := i + 1
			for j < len(src) && src[j] != c {
				if src[j] == '\\' {
					j++
				}
				j++
			}
			i = j
			continue
		case '(', '[', '{':
			depth++
			continue
		}
		if depth == 0 && (strings.HasPrefix(src[i:], closer) || strings.HasPrefix(src[i:], "-"+closer) || strings.HasPrefix(src[i:], "+"+closer)) {
			if src[i] == '-' || src[i] == '+' {
				i++
			}
			return i, true
		}
		if c == ')' || c == ']' || c == '}' {
			if depth > 0 {
				depth--
			}
		}
	}
	return 0, false
}

// findEndRaw finds "{% endraw %}" (with optional - signs) after pos and
// returns where it starts, where it ends and its left sign.
func findEndRaw(src string, pos int) (start, end int, sign byte, ok bool) {
	for i := pos; ; {
		j := strings.Index(src[i:], "{%")
		if j < 0 {
			return 0, 0, 0, false
		}
		s := i + j
		k := s + 2
		var sg byte
		if k < len(src) && (src[k] == '-' || src[k] == '+') {
			sg = src[k]
			k++
		}
		e, found := findCloser(src, k, "%}")
		if found {
			inner := strings.TrimSuffix(strings.TrimSuffix(src[k:e], "-"), "+")
			if strings.TrimSpace(inner) == "endraw" {
				return s, e + 2, sg, true
			}
		}
		i = s + 2
	}
}

// Tokens of the expression language.

type tokKind int

const (
	tkEOF tokKind = iota
	tkName
	tkString
	tkInt
	tkFloat
	tkOp
)

type token struct {
	kind tokKind
	s    string // name, decoded string, number text or operator
	line int
}

// operators, longest first.
var operators = []string{"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "|", ".", ",", ":", "(", ")", "[", "]", "{", "}", "<", ">", "="}

// lexExpr splits the inside of a tag into tokens.
func lexExpr(s string, line int) ([]token, error) {
	var toks []token
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == '\n':
			line++
			i++
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			i++
		case c == '\'' || c == '"':
			j := i + 1
			for j < len(s) && s[j] != c {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(s) {
				return nil, &Error{Line: line, Msg: "unterminated string"}
			}
			raw := s[i+1 : j]
			toks = append(toks, token{kind: tkString, s: unescape(raw), line: line})
			line += strings.Count(raw, "\n")
			i = j + 1
		case c >= '0' && c <= '9':
			j := i
			isFloat := false
			for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == '_') {
				j++
			}
			if j+1 < len(s) && s[j] == '.' && s[j+1] >= '0' && s[j+1] <= '9' {
				isFloat = true
				j++
				for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == '_') {
					j++
				}
			}
			if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
				k := j + 1
				if k < len(s) && (s[k] == '+' || s[k] == '-') {
					k++
				}
				if k < len(s) && s[k] >= '0' && s[k] <= '9' {
					isFloat = true
					j = k
					for j < len(s) && s[j] >= '0' && s[j] <= '9' {
						j++
					}
				}
			}
			kind := tkInt
			if isFloat {
				kind = tkFloat
			}
			toks = append(toks, token{kind: kind, s: strings.ReplaceAll(s[i:j], "_", ""), line: line})
			i = j
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i
			for j < len(s) && (s[j] == '_' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= '0' && s[j] <= '9') {
				j++
			}
			toks = append(toks, token{kind: tkName, s: s[i:j], line: line})
			i = j
		default:
			found := false
			for _, op := range operators {
				if strings.HasPrefix(s[i:], op) {
					toks = append(toks, token{kind: tkOp, s: op, line: line})
					i += len(op)
					found = true
					break
				}
			}
			if !found {
				r, _ := utf8.DecodeRuneInString(s[i:])
				return nil, &Error{Line: line, Msg: "unexpected character " + strconvQuote(string(r))}
			}
		}
	}
	toks = append(toks, token{kind: tkEOF, line: line})
	return toks, nil
}

// unescape decodes a string literal's escapes as jinja2 does (Python's
// unicode-escape codec).
func unescape(raw string) string {
	if !strings.Contains(raw, "\\") {
		return raw
	}
	var b strings.Builder
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '\\' || i+1 >= len(raw) {
			b.WriteByte(c)
			continue
		}
		i++
		switch e := raw[i]; e {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'v':
			b.WriteByte('\v')
		case 'a':
			b.WriteByte('\a')
		case '0', '1', '2', '3', '4', '5', '6', '7':
			n, k := 0, 0
			for k < 3 && i+k < len(raw) && raw[i+k] >= '0' && raw[i+k] <= '7' {
				n = n*8 + int(raw[i+k]-'0')
				k++
			}
			b.WriteRune(rune(n))
			i += k - 1
		case 'x', 'u', 'U':
			width := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			if i+width < len(raw) && isHex(raw[i+1:i+1+width], width) {
				var n rune
				for _, h := range raw[i+1 : i+1+width] {
					n = n*16 + rune(hexVal(byte(h)))
				}
				b.WriteRune(n)
				i += width
			} else {
				b.WriteByte('\\')
				b.WriteByte(e)
			}
		case '\n':
			// line continuation
		case '\\', '\'', '"':
			b.WriteByte(e)
		default:
			b.WriteByte('\\')
			b.WriteByte(e)
		}
	}
	return b.String()
}

func isHex(s string, width int) bool {
	if len(s) != width {
		return false
	}
	for i := 0; i < len(s); i++ {
		if hexVal(s[i]) < 0 {
			return false
		}
	}
	return true
}

func hexVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
