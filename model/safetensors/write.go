package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
)

// headerAlign is the alignment of the data section that Write pads the
// header to, so that 8-byte elements of a mapped file are aligned.
const headerAlign = 8

// Write writes a safetensors file to w holding the given tensors (their
// Name, DType, Shape and Data; Begin, End and File are ignored) and metadata
// (may be nil). Data is laid out in the order given. It is meant for tests
// and small tools; it checks each tensor's size against its dtype and shape.
func Write(w io.Writer, tensors []Tensor, metadata map[string]string) error {
	type entry struct {
		DType       DType    `json:"dtype"`
		Shape       []int    `json:"shape"`
		DataOffsets [2]int64 `json:"data_offsets"`
	}
	hdr := make(map[string]any, len(tensors)+1)
	if metadata != nil {
		hdr[metadataKey] = metadata
	}
	var off int64
	for _, t := range tensors {
		if _, dup := hdr[t.Name]; dup || t.Name == metadataKey {
			return &Error{Tensor: t.Name, Err: fmt.Errorf("write: duplicate or reserved name")}
		}
		size := t.DType.Size()
		if size == 0 {
			return &Error{Tensor: t.Name, Err: fmt.Errorf("write: unknown dtype %q", t.DType)}
		}
		shape := t.Shape
		if shape == nil {
			shape = []int{}
		}
		n := 1
		for _, d := range shape {
			if d < 0 {
				return &Error{Tensor: t.Name, Err: fmt.Errorf("write: shape %v", shape)}
			}
			n *= d
		}
		if len(t.Data) != n*size {
			return &Error{Tensor: t.Name, Err: fmt.Errorf("write: %d bytes for %s%v (want %d)", len(t.Data), t.DType, shape, n*size)}
		}
		hdr[t.Name] = entry{DType: t.DType, Shape: shape, DataOffsets: [2]int64{off, off + int64(len(t.Data))}}
		off += int64(len(t.Data))
	}
	js, err := json.Marshal(hdr)
	if err != nil {
		return fmt.Errorf("safetensors: write: %w", err)
	}
	pad := (headerAlign - (headerLenSize+len(js))%headerAlign) % headerAlign
	js = append(js, bytes.Repeat([]byte{' '}, pad)...)
	var lenBuf [headerLenSize]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(js)))
	if _, err := w.Write(lenBuf[:]); err != nil {
		return fmt.Errorf("safetensors: write: %w", err)
	}
	if _, err := w.Write(js); err != nil {
		return fmt.Errorf("safetensors: write: %w", err)
	}
	for _, t := range tensors {
		if _, err := w.Write(t.Data); err != nil {
			return fmt.Errorf("safetensors: write %s: %w", t.Name, err)
		}
	}
	return nil
}
