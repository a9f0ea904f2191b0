package tokenizer

import "unicode/utf8"

// Byte-level alphabet of GPT-2 (openai/gpt-2 src/encoder.py bytes_to_unicode,
// tokenizers/src/pre_tokenizers/byte_level.rs bytes_char): the printable
// bytes '!'..'~', '¡'..'¬' and '®'..'ÿ' stand for themselves; the other 68
// bytes map, in increasing order, to U+0100, U+0101, ... So ' ' is 'Ġ'
// (U+0120) and '\n' is 'Ċ' (U+010A).
const byteLevelFirstShifted = 0x100

var (
	// byteToChar[b] is the UTF-8 encoding of the stand-in of byte b.
	byteToChar [256]string
	// charToByte[r] is the byte whose stand-in is r, for r < charToByteLen;
	// charIsByte says which entries are valid.
	charToByte [charToByteLen]byte
	charIsByte [charToByteLen]bool
)

const charToByteLen = byteLevelFirstShifted + 256

func init() {
	n := 0
	for b := 0; b < 256; b++ {
		r := rune(b)
		printable := ('!' <= b && b <= '~') || (0xA1 <= b && b <= 0xAC) || (0xAE <= b && b <= 0xFF)
		if !printable {
			r = rune(byteLevelFirstShifted + n)
			n++
		}
		byteToChar[b] = string(r)
		charToByte[r] = byte(b)
		charIsByte[r] = true
	}
}

// byteLevelBytes appends the bytes a byte-level token stands for. A token
// with any character outside the alphabet (an added token such as
// "<|eot_id|>" in a tokenizer whose added tokens are not byte-mapped) is
// taken as its own UTF-8 bytes, as HF's ByteLevel decoder does.
func byteLevelBytes(dst []byte, tok string) []byte {
	start := len(dst)
	for _, r := range tok {
		if r < 0 || r >= charToByteLen || !charIsByte[r] {
			return append(dst[:start], tok...)
		}
		dst = append(dst, charToByte[r])
	}
	return dst
}

// appendLossy appends b to dst as a string with every maximal invalid UTF-8
// subsequence replaced by one U+FFFD, as Rust's String::from_utf8_lossy
// does (Go's own conversions replace each invalid byte separately).
func appendLossy(dst []byte, b []byte) []byte {
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			dst = append(dst, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		if r != utf8.RuneError || n > 1 {
			dst = append(dst, b[i:i+n]...)
			i += n
			continue
		}
		dst = append(dst, "\uFFFD"...)
		i += invalidPrefixLen(b[i:])
	}
	return dst
}

// invalidPrefixLen is the length of the maximal prefix of b (which starts
// with an invalid sequence) that is the start of some valid sequence, or 1:
// the "maximal subpart" rule of Unicode §3.9 that Rust follows.
func invalidPrefixLen(b []byte) int {
	c := b[0]
	var need int
	lo, hi := byte(0x80), byte(0xBF)
	switch {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		need = 2
	case c == 0xED:
		need, hi = 2, 0x9F
	case c == 0xF0:
		need, lo = 3, 0x90
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	case c == 0xF4:
		need, hi = 3, 0x8F
	default:
		return 1
	}
	i := 1
	for ; i <= need && i < len(b); i++ {
		if b[i] < lo || b[i] > hi {
			break
		}
		lo, hi = 0x80, 0xBF
	}
	return i
}
