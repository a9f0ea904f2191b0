package wq

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Elem is the element type a weight is stored in.
type Elem uint8

// The element types. Integer types are quantized per group with fp16
// (scale, zero) pairs; FP16 stores the (fp16-rounded) values.
const (
	FP16 Elem = iota + 1
	Int8
	Int4
	Int3
)

// String returns the canonical name ("int4", "fp16", ...).
func (e Elem) String() string {
	switch e {
	case FP16:
		return "fp16"
	case Int8:
		return "int8"
	case Int4:
		return "int4"
	case Int3:
		return "int3"
	}
	return fmt.Sprintf("Elem(%d)", uint8(e))
}

// Bits returns the bits of one stored element.
func (e Elem) Bits() int {
	switch e {
	case FP16:
		return 16
	case Int8:
		return 8
	case Int4:
		return 4
	case Int3:
		return 3
	}
	return 0
}

// IsInt reports whether e is quantized with scales and zeros.
func (e Elem) IsInt() bool { return e == Int8 || e == Int4 || e == Int3 }

// Levels returns L = 2^bits − 1, the largest code of an integer type.
func (e Elem) Levels() int { return 1<<e.Bits() - 1 }

// BlockElems returns E, the input channels of one packed block (package doc).
func (e Elem) BlockElems() int {
	switch e {
	case FP16:
		return 2
	case Int8:
		return 4
	case Int4:
		return 8
	case Int3:
		return 32
	}
	return 0
}

// BlockWords returns WB, the uint32 words of one packed block.
func (e Elem) BlockWords() int {
	if e == Int3 {
		return 3
	}
	if e == 0 || e > Int3 {
		return 0
	}
	return 1
}

// Method is the quantization algorithm that picks codes and params.
type Method uint8

// The methods. Both produce the same format.
const (
	// RTN rounds each weight to the nearest code (package doc).
	RTN Method = iota + 1
	// GPTQ rounds column by column and pushes each error onto the columns
	// not yet quantized, using calibration statistics (package doc).
	GPTQ
)

// String returns "rtn" or "gptq".
func (m Method) String() string {
	switch m {
	case RTN:
		return "rtn"
	case GPTQ:
		return "gptq"
	}
	return fmt.Sprintf("Method(%d)", uint8(m))
}

// DefaultGroup is the group size G when a spec names none.
const DefaultGroup = 128

// ValidGroups lists the group sizes a spec accepts: multiples of 32, the
// int3 block, so no packed block straddles two groups.
var ValidGroups = []int{32, 64, 128, 256}

// Spec is a parsed weight format: element type, group size and method.
type Spec struct {
	Elem   Elem
	Group  int    // G, input channels per (scale, zero) pair; 0 for fp16
	Method Method // RTN or GPTQ; 0 for fp16
	// ActOrder makes GPTQ walk the channels most active first
	// (GPTQOptions.ActOrder); spec word "act".
	ActOrder bool
	// Head is the LM head's format (spec word "head=F"): Int8, Int4 or
	// Int3 quantize it by RTN in groups of Group (a tied head is a
	// quantized copy of the embedding, whose values the token lookup then
	// reads too: package model); 0 keeps it 16-bit ("head=fp16").
	// ParseSpec sets DefaultHead for a quantized spec that names none.
	Head Elem
}

// DefaultHead is the LM head's format when a quantized spec names none:
// int8 costs gocoder-23m no perplexity at 4 decimals and halves the head's
// bytes (docs/weights.md), as llama.cpp keeps its Q4/Q8 files' output
// tensor at 6 to 8 bits.
const DefaultHead = Int8

// HeadQuantized reports whether s quantizes the LM head.
func (s Spec) HeadQuantized() bool { return s.Head.IsInt() }

// HeadSpec returns the spec the LM head is quantized with: Head in s's
// groups, by RTN (GPTQ's statistics are the layers').
func (s Spec) HeadSpec() Spec { return Spec{Elem: s.Head, Group: s.Group, Method: RTN} }

// IsQuantized reports whether s stores integer codes (not fp16).
func (s Spec) IsQuantized() bool { return s.Elem.IsInt() }

// String returns the canonical spec ("int4:g128:rtn", "fp16").
func (s Spec) String() string {
	if !s.IsQuantized() {
		return s.Elem.String()
	}
	out := fmt.Sprintf("%s:g%d:%s", s.Elem, s.Group, s.Method)
	if s.ActOrder {
		out += ":act"
	}
	return out + ":head=" + s.headWord()
}

// headWord names the head's format in a spec ("int8", "fp16").
func (s Spec) headWord() string {
	if !s.HeadQuantized() {
		return FP16.String()
	}
	return s.Head.String()
}

// Short returns the spec without defaults ("int4", "int3:gptq").
func (s Spec) Short() string {
	if !s.IsQuantized() {
		return s.Elem.String()
	}
	out := s.Elem.String()
	if s.Group != DefaultGroup {
		out += ":g" + strconv.Itoa(s.Group)
	}
	if s.Method != RTN {
		out += ":" + s.Method.String()
	}
	if s.ActOrder {
		out += ":act"
	}
	if s.Head != DefaultHead {
		out += ":head=" + s.headWord()
	}
	return out
}

// SpecGrammar documents what ParseSpec accepts; the CLI prints it.
const SpecGrammar = `weight format spec:  BASE[:OPTION]...

BASE     fp16 | int8 | int4 | int3
OPTION   rtn     round to nearest (default)
         gptq    GPTQ with the Hessians of a calibration text (--calib FILE)
         act     GPTQ in act-order (most active channels first; implies gptq)
         gG      groups of G input channels per fp16 (scale, zero): 32, 64,
                 128 (default) or 256
         head=F  the LM head's format: int8 (default), int4 or int3 (RTN,
                 groups of G; a tied head is the embedding quantized, and
                 the token lookup reads it too), or fp16 (as stored)
examples: int4   int3:gptq   int3:act   int4:g64:gptq   int4:head=fp16   fp16`

// SpecError reports a spec that cannot be parsed: the whole spec, the part
// at fault and why.
type SpecError struct {
	Spec  string // the spec as given
	Field string // the part that is wrong ("" when the spec is empty)
	Err   error  // the reason
}

func (e *SpecError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("wq: invalid weight spec %q: %v", e.Spec, e.Err)
	}
	return fmt.Sprintf("wq: invalid weight spec %q at %q: %v", e.Spec, e.Field, e.Err)
}

// Unwrap returns the reason.
func (e *SpecError) Unwrap() error { return e.Err }

// ErrSpec is the reason behind a SpecError for an unknown word.
var ErrSpec = errors.New("unknown word")

// parseElem returns the element type a spec word names: fp16 (also f16,
// half and bf16: bf16 checkpoints are rounded to fp16 like every other
// input), int8, int4 or int3.
func parseElem(word string) (Elem, bool) {
	switch word {
	case "fp16", "f16", "half", "bf16":
		return FP16, true
	case "int8":
		return Int8, true
	case "int4":
		return Int4, true
	case "int3":
		return Int3, true
	}
	return 0, false
}

// ParseSpec parses a weight format spec (see SpecGrammar).
func ParseSpec(str string) (Spec, error) {
	fail := func(field string, err error) (Spec, error) {
		return Spec{}, &SpecError{Spec: str, Field: field, Err: err}
	}
	parts := strings.Split(strings.ToLower(strings.TrimSpace(str)), ":")
	var s Spec
	var ok bool
	if parts[0] == "" {
		return fail("", errors.New("empty spec"))
	}
	if s.Elem, ok = parseElem(parts[0]); !ok {
		return fail(parts[0], fmt.Errorf("%w (want fp16, int8, int4 or int3)", ErrSpec))
	}
	if s.IsQuantized() {
		s.Group, s.Method, s.Head = DefaultGroup, RTN, DefaultHead
	}
	for _, p := range parts[1:] {
		if !s.IsQuantized() {
			return fail(p, errors.New("fp16 takes no options"))
		}
		switch {
		case p == "rtn":
			s.Method = RTN
		case p == "gptq":
			s.Method = GPTQ
		case p == "act":
			s.Method, s.ActOrder = GPTQ, true
		case strings.HasPrefix(p, "head="):
			v := strings.TrimPrefix(p, "head=")
			if s.Head, ok = parseElem(v); !ok {
				return fail(p, fmt.Errorf("%w: head format %q (want int8, int4, int3 or fp16)", ErrSpec, v))
			}
			if !s.Head.IsInt() {
				s.Head = 0 // the head as stored
			}
		case strings.HasPrefix(p, "g"):
			g, err := strconv.Atoi(p[1:])
			if err != nil {
				return fail(p, fmt.Errorf("group size: %w", err))
			}
			ok := false
			for _, v := range ValidGroups {
				ok = ok || v == g
			}
			if !ok {
				return fail(p, fmt.Errorf("group size %d (want one of %v)", g, ValidGroups))
			}
			s.Group = g
		default:
			return fail(p, fmt.Errorf("%w (want rtn, gptq, act or gG)", ErrSpec))
		}
	}
	if s.ActOrder && s.Method != GPTQ {
		return fail(str, errors.New("act-order is a GPTQ option (rtn and act conflict)"))
	}
	return s, nil
}

// RowWords returns the uint32 words of one packed row of K input channels.
// K must be a multiple of the element's block (Check says so).
func (e Elem) RowWords(K int) int { return K / e.BlockElems() * e.BlockWords() }

// RowBytes returns the bytes one row of K input channels takes in format
// (e, G): codes plus fp16 (scale, zero) pairs. G is ignored for fp16.
func RowBytes(e Elem, G, K int) int64 {
	b := int64(e.RowWords(K)) * 4
	if e.IsInt() {
		b += int64(K/G) * 4
	}
	return b
}

// Bytes returns the memory of an [N, K] weight in format (e, G).
func Bytes(e Elem, G, N, K int) int64 { return int64(N) * RowBytes(e, G, K) }

// Check reports whether an [N, K] weight can be stored in format (e, G):
// K must be a positive multiple of the group (integer types) and of the
// packed block.
func Check(e Elem, G, N, K int) error {
	if e.BlockElems() == 0 {
		return fmt.Errorf("wq: unknown element type %v", e)
	}
	if N <= 0 || K <= 0 {
		return fmt.Errorf("wq: invalid shape [%d, %d]", N, K)
	}
	if e.IsInt() {
		if G <= 0 || G%Int3.BlockElems() != 0 {
			return fmt.Errorf("wq: group size %d is not a positive multiple of %d", G, Int3.BlockElems())
		}
		if K%G != 0 {
			hint := ""
			for _, g := range slices.Backward(ValidGroups) {
				if g < G && K%g == 0 && K%e.BlockElems() == 0 {
					hint = fmt.Sprintf(" (groups of %d divide it: %v:g%d)", g, e, g)
					break
				}
			}
			return fmt.Errorf("wq: %d input channels are not a multiple of the group size %d%s", K, G, hint)
		}
	}
	if K%e.BlockElems() != 0 {
		return fmt.Errorf("wq: %d input channels are not a multiple of the %s block of %d", K, e, e.BlockElems())
	}
	return nil
}
