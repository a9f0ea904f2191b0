package tokenizer

// Fast reading of a JSON file already checked valid (json.Valid, once per
// file: rootNode). encoding/json re-validates and copies every value it
// decodes, so reading tokenizer.json's root object, then its model object,
// then the vocabulary and the merges scanned the largest part of the file
// five to six times and copied it three times (Llama 3's 9 MB file loaded in
// ~0.37 s, Gemma 3's 33 MB in ~1.4 s). Here a valid file's objects and arrays
// are split into sub-slices of the file's bytes without copying, and the
// vocabulary's entries and the merges are decoded in one pass. Strings with
// escapes or non-ASCII bytes that are not valid UTF-8 go to encoding/json, so
// every value decodes exactly as it decoded before (TestFastJSONSame); a
// file that is not valid JSON takes encoding/json's path and its errors.
// Load, 2-core Zen 4 VM (session 29): Llama 3's tokenizer 370 → 190 ms,
// Qwen3's 415 → 165 ms, Gemma 3's 1.41 → 0.59 s; what remains is the one
// json.Valid pass, the merges' three vocabulary lookups each (one map probe
// of a long string, mostly cache misses) and building the maps.

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// skipSpace returns the index of the first non-space byte of b at or after i.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the index just past the valid JSON value that starts at
// b[i] (no leading space).
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	default: // a number, true, false or null
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return i
	}
}

// skipString returns the index just past the string literal at b[i].
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// unquote decodes the string literal lit (quotes included) as encoding/json
// does: plain ASCII and valid UTF-8 without escapes directly, the rest by
// encoding/json (escapes, and the U+FFFD it puts for invalid UTF-8).
func unquote(lit []byte) (string, error) {
	body := lit[1 : len(lit)-1]
	plain := true
	for _, c := range body {
		if c == '\\' || c < 0x20 {
			plain = false
			break
		}
	}
	if plain && utf8.Valid(body) {
		return string(body), nil
	}
	var s string
	err := json.Unmarshal(lit, &s)
	return s, err
}

// splitObject returns the members of the valid JSON object t as sub-slices
// of t (the last of a repeated key wins, as encoding/json's map does).
func splitObject(t []byte) (map[string]json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	i := skipSpace(t, 1)
	for i < len(t) && t[i] != '}' {
		e := skipString(t, i)
		key, err := unquote(t[i:e])
		if err != nil {
			return nil, err
		}
		i = skipSpace(t, e)
		i = skipSpace(t, i+1) // past ':'
		e = skipValue(t, i)
		m[key] = t[i:e:e]
		i = skipSpace(t, e)
		if i < len(t) && t[i] == ',' {
			i = skipSpace(t, i+1)
		}
	}
	return m, nil
}

// splitArray returns the elements of the valid JSON array t as sub-slices.
func splitArray(t []byte) []json.RawMessage {
	var out []json.RawMessage
	i := skipSpace(t, 1)
	for i < len(t) && t[i] != ']' {
		e := skipValue(t, i)
		out = append(out, t[i:e:e])
		i = skipSpace(t, e)
		if i < len(t) && t[i] == ',' {
			i = skipSpace(t, i+1)
		}
	}
	return out
}

// fastVocab decodes the valid JSON object t of token → id in one pass; ok is
// false where an entry is not a plain integer id within range (the caller
// then takes the checked path, which names it).
func fastVocab(t []byte) (v map[string]int32, ok bool) {
	v = make(map[string]int32, len(t)/16)
	i := skipSpace(t, 1)
	for i < len(t) && t[i] != '}' {
		e := skipString(t, i)
		tok, err := unquote(t[i:e])
		if err != nil {
			return nil, false
		}
		i = skipSpace(t, e)
		i = skipSpace(t, i+1)
		var id int64
		j := i
		for ; j < len(t) && t[j] >= '0' && t[j] <= '9'; j++ {
			id = id*10 + int64(t[j]-'0')
			if id > maxTokenID {
				return nil, false
			}
		}
		if j == i || j-i > 1 && t[i] == '0' { // not a plain non-negative integer
			return nil, false
		}
		if e = skipValue(t, i); e != j {
			return nil, false // a fraction or an exponent
		}
		v[tok] = int32(id)
		i = skipSpace(t, e)
		if i < len(t) && t[i] == ',' {
			i = skipSpace(t, i+1)
		}
	}
	return v, true
}

// rawString returns the decoded bytes of the string literal lit: a
// sub-slice of lit where it has no escape and is valid UTF-8 (no copy),
// else unquote's string.
func rawString(lit []byte) ([]byte, error) {
	body := lit[1 : len(lit)-1]
	for _, c := range body {
		if c == '\\' {
			s, err := unquote(lit)
			return []byte(s), err
		}
	}
	if !utf8.Valid(body) {
		s, err := unquote(lit)
		return []byte(s), err
	}
	return body, nil
}

// fastMerges walks the valid JSON array t of merges, in either usual form
// ("a b" strings, a "#version" string skipped, or ["a", "b"] pairs), calling
// add with each pair's decoded bytes (valid only during the call) until it
// returns false; ok is false where an entry has another form or add refused
// one.
func fastMerges(t []byte, add func(a, b []byte) bool) (ok bool) {
	i := skipSpace(t, 1)
	for i < len(t) && t[i] != ']' {
		switch t[i] {
		case '"':
			e := skipString(t, i)
			s, err := rawString(t[i:e])
			if err != nil {
				return false
			}
			i = e
			if bytes.HasPrefix(s, []byte("#version")) {
				break
			}
			sp := bytes.IndexByte(s, ' ')
			if sp < 0 || bytes.IndexByte(s[sp+1:], ' ') >= 0 || !add(s[:sp], s[sp+1:]) {
				return false
			}
		case '[':
			var p [2][]byte
			j := skipSpace(t, i+1)
			for k := range 2 {
				if j >= len(t) || t[j] != '"' {
					return false
				}
				e := skipString(t, j)
				s, err := rawString(t[j:e])
				if err != nil {
					return false
				}
				p[k] = s
				j = skipSpace(t, e)
				if k == 0 {
					if j >= len(t) || t[j] != ',' {
						return false
					}
					j = skipSpace(t, j+1)
				}
			}
			if j >= len(t) || t[j] != ']' || !add(p[0], p[1]) {
				return false
			}
			i = j + 1
		default:
			return false
		}
		i = skipSpace(t, i)
		if i < len(t) && t[i] == ',' {
			i = skipSpace(t, i+1)
		}
	}
	return true
}
