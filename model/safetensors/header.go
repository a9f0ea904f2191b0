package safetensors

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
)

// MaxHeaderSize is the largest JSON header accepted, in bytes: 100 MB, the
// limit of the reference (Rust) implementation. A real header is a few
// hundred bytes per tensor.
const MaxHeaderSize = 100_000_000

// headerLenSize is the size of the little-endian uint64 header length that
// opens a file.
const headerLenSize = 8

// metadataKey is the reserved header entry holding free-form string metadata.
const metadataKey = "__metadata__"

// DType is a safetensors element type, spelled as in the header ("BF16").
type DType string

// The element types of the safetensors format. F32, F16 and BF16 convert to
// float32; the others can be listed and read as bytes.
const (
	F64    DType = "F64"
	F32    DType = "F32"
	F16    DType = "F16"
	BF16   DType = "BF16"
	F8E4M3 DType = "F8_E4M3"
	F8E5M2 DType = "F8_E5M2"
	I64    DType = "I64"
	I32    DType = "I32"
	I16    DType = "I16"
	I8     DType = "I8"
	U64    DType = "U64"
	U32    DType = "U32"
	U16    DType = "U16"
	U8     DType = "U8"
	Bool   DType = "BOOL"
	F8E8M0 DType = "F8_E8M0"
	C64    DType = "C64"
)

// dtypeSizes holds the element size in bytes of every byte-aligned dtype of
// the format. (The format's sub-byte types F4, F6_E2M3 and F6_E3M2 are not
// accepted.)
var dtypeSizes = map[DType]int64{
	F64: 8, F32: 4, F16: 2, BF16: 2, F8E4M3: 1, F8E5M2: 1, F8E8M0: 1,
	I64: 8, I32: 4, I16: 2, I8: 1, U64: 8, U32: 4, U16: 2, U8: 1, Bool: 1, C64: 8,
}

// Size returns the size of one element in bytes, or 0 if d is not a
// byte-aligned dtype of the format.
func (d DType) Size() int { return int(dtypeSizes[d]) }

// TensorInfo describes one tensor of a file's header.
type TensorInfo struct {
	Name  string
	DType DType
	Shape []int // empty for a scalar
	// Begin and End are the byte offsets of the tensor's data relative to
	// the start of the data section (after the header), End exclusive.
	Begin, End int64
}

// NumElements returns the number of elements: the product of the shape (1
// for a scalar).
func (t *TensorInfo) NumElements() int {
	n := 1
	for _, d := range t.Shape {
		n *= d // validated not to overflow when the header was parsed
	}
	return n
}

// Header is a parsed and validated safetensors header.
type Header struct {
	Metadata map[string]string // the "__metadata__" entry; nil if absent
	Tensors  []TensorInfo      // sorted by name
}

// Error is the error of a failed parse or read. It names the file and, where
// the fault lies in one tensor, the tensor, and wraps the cause.
type Error struct {
	File   string // file path, or "" when parsing bytes of no file
	Tensor string // tensor name, or "" for file-level faults
	Err    error
}

// Error implements error.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("safetensors: ")
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(": ")
	}
	if e.Tensor != "" {
		fmt.Fprintf(&b, "tensor %q: ", e.Tensor)
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// ErrUnsupportedDType is the cause of an error converting a tensor whose
// dtype has no float32 conversion.
var ErrUnsupportedDType = errors.New("unsupported dtype")

// rawTensor is one tensor entry of the JSON header as written.
type rawTensor struct {
	DType       *string  `json:"dtype"`
	Shape       *[]int64 `json:"shape"`
	DataOffsets []int64  `json:"data_offsets"`
}

// ParseHeader parses and validates the JSON header of a file whose data
// section (the bytes after the header) is dataSize bytes long. Errors are
// *Error values without a file name.
func ParseHeader(header []byte, dataSize int64) (*Header, error) {
	if dataSize < 0 {
		return nil, &Error{Err: fmt.Errorf("negative data size %d", dataSize)}
	}
	dec := json.NewDecoder(bytes.NewReader(header))
	if tok, err := dec.Token(); err != nil {
		return nil, &Error{Err: fmt.Errorf("header: %w", err)}
	} else if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, &Error{Err: fmt.Errorf("header is not a JSON object")}
	}
	h := &Header{}
	seen := make(map[string]bool)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, &Error{Err: fmt.Errorf("header: %w", err)}
		}
		name, ok := tok.(string)
		if !ok {
			return nil, &Error{Err: fmt.Errorf("header: key %v is not a string", tok)}
		}
		if seen[name] {
			return nil, &Error{Tensor: name, Err: errors.New("appears twice in the header")}
		}
		seen[name] = true
		if name == metadataKey {
			if err := dec.Decode(&h.Metadata); err != nil {
				return nil, &Error{Err: fmt.Errorf("%s: want an object of strings: %w", metadataKey, err)}
			}
			continue
		}
		var raw rawTensor
		if err := dec.Decode(&raw); err != nil {
			return nil, &Error{Tensor: name, Err: fmt.Errorf("header entry: %w", err)}
		}
		info, err := checkTensor(name, &raw, dataSize)
		if err != nil {
			return nil, &Error{Tensor: name, Err: err}
		}
		h.Tensors = append(h.Tensors, info)
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return nil, &Error{Err: fmt.Errorf("header: %w", err)}
	}
	// Only padding (spaces, as writers align the data section) may follow.
	rest := header[dec.InputOffset():]
	if len(bytes.TrimLeft(rest, " \t\r\n")) != 0 {
		return nil, &Error{Err: errors.New("header: data after the JSON object")}
	}
	if err := checkOverlap(h.Tensors); err != nil {
		return nil, err
	}
	slices.SortFunc(h.Tensors, func(a, b TensorInfo) int { return strings.Compare(a.Name, b.Name) })
	return h, nil
}

// checkTensor validates one raw header entry against a data section of
// dataSize bytes.
func checkTensor(name string, raw *rawTensor, dataSize int64) (TensorInfo, error) {
	info := TensorInfo{Name: name}
	if raw.DType == nil {
		return info, errors.New("missing dtype")
	}
	info.DType = DType(*raw.DType)
	size, ok := dtypeSizes[info.DType]
	if !ok {
		return info, fmt.Errorf("unknown dtype %q", *raw.DType)
	}
	if raw.Shape == nil {
		return info, errors.New("missing shape")
	}
	// Count elements in uint64, checking every product for overflow and the
	// total against the data section (which bounds it far below 2^63).
	var n uint64 = 1
	info.Shape = make([]int, len(*raw.Shape))
	for i, d := range *raw.Shape {
		if d < 0 || uint64(d) > math.MaxInt {
			return info, fmt.Errorf("shape %v: dimension %d is %d", *raw.Shape, i, d)
		}
		info.Shape[i] = int(d)
		hi, lo := bits.Mul64(n, uint64(d))
		if hi != 0 || lo > math.MaxInt64 {
			return info, fmt.Errorf("shape %v: element count overflows", *raw.Shape)
		}
		n = lo
	}
	hi, nbytes := bits.Mul64(n, uint64(size))
	if hi != 0 || nbytes > math.MaxInt64 || nbytes > math.MaxInt {
		return info, fmt.Errorf("shape %v of %s: byte size overflows", *raw.Shape, info.DType)
	}
	if len(raw.DataOffsets) != 2 {
		return info, fmt.Errorf("data_offsets %v: want [begin, end]", raw.DataOffsets)
	}
	info.Begin, info.End = raw.DataOffsets[0], raw.DataOffsets[1]
	if info.Begin < 0 || info.End < info.Begin || info.End > dataSize {
		return info, fmt.Errorf("data_offsets [%d, %d] out of the data section of %d bytes", info.Begin, info.End, dataSize)
	}
	if uint64(info.End-info.Begin) != nbytes {
		return info, fmt.Errorf("data_offsets [%d, %d] hold %d bytes, but %s%v needs %d", info.Begin, info.End, info.End-info.Begin, info.DType, info.Shape, nbytes)
	}
	return info, nil
}

// checkOverlap reports two tensors whose byte ranges overlap. Empty tensors
// occupy no bytes and overlap nothing.
func checkOverlap(ts []TensorInfo) error {
	var spans []TensorInfo
	for _, t := range ts {
		if t.End > t.Begin {
			spans = append(spans, t)
		}
	}
	slices.SortFunc(spans, func(a, b TensorInfo) int {
		if a.Begin != b.Begin {
			return cmp.Compare(a.Begin, b.Begin)
		}
		return strings.Compare(a.Name, b.Name)
	})
	for i := 1; i < len(spans); i++ {
		if p, t := spans[i-1], spans[i]; t.Begin < p.End {
			return &Error{Tensor: t.Name, Err: fmt.Errorf("data_offsets [%d, %d] overlap tensor %q at [%d, %d]", t.Begin, t.End, p.Name, p.Begin, p.End)}
		}
	}
	return nil
}
