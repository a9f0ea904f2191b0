package safetensors

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/bitdecode/bitdecode/internal/fileio"
)

// File is an open safetensors file. Its tensor data is a view of the
// memory-mapped (or read) file and is valid until Close. A File is safe for
// concurrent reads.
type File struct {
	path   string
	header *Header
	byName map[string]int // index into header.Tensors
	data   []byte         // the data section
	unmap  func() error   // releases the mapping; nil when the file was read
}

// Open opens and validates the safetensors file at path. The file is
// memory-mapped where the platform allows and read into memory otherwise.
func Open(path string) (*File, error) {
	f, err := fileio.Open(path) // a FIFO or device is refused before anything blocks
	if err != nil {
		return nil, &Error{File: path, Err: err}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, &Error{File: path, Err: err}
	}
	size := st.Size()
	if !st.Mode().IsRegular() {
		return nil, &Error{File: path, Err: errors.New("not a regular file")}
	}
	if size < headerLenSize {
		return nil, &Error{File: path, Err: fmt.Errorf("file of %d bytes is too short for the %d-byte header length", size, headerLenSize)}
	}
	if uint64(size) > math.MaxInt {
		return nil, &Error{File: path, Err: fmt.Errorf("file of %d bytes is too large for this platform", size)}
	}
	buf, unmap, err := mmapFile(f, size)
	if err != nil {
		// No mmap here (or it failed): read the file instead.
		buf = make([]byte, size)
		if _, err := io.ReadFull(f, buf); err != nil {
			return nil, &Error{File: path, Err: fmt.Errorf("read: %w", err)}
		}
		unmap = nil
	}
	sf, err := parse(path, buf)
	if err != nil {
		if unmap != nil {
			_ = unmap()
		}
		return nil, err
	}
	sf.unmap = unmap
	return sf, nil
}

// OpenBytes parses a whole safetensors file held in memory. name is used in
// error messages. The File keeps b (no copy); b must not change while the
// File is in use.
func OpenBytes(name string, b []byte) (*File, error) {
	return parse(name, b)
}

// parse validates the file image buf and returns a File over it.
func parse(path string, buf []byte) (*File, error) {
	if len(buf) < headerLenSize {
		return nil, &Error{File: path, Err: fmt.Errorf("file of %d bytes is too short for the %d-byte header length", len(buf), headerLenSize)}
	}
	n := binary.LittleEndian.Uint64(buf)
	avail := uint64(len(buf) - headerLenSize)
	switch {
	case n > MaxHeaderSize:
		return nil, &Error{File: path, Err: fmt.Errorf("header length %d exceeds the %d-byte limit", n, MaxHeaderSize)}
	case n > avail:
		return nil, &Error{File: path, Err: fmt.Errorf("header length %d exceeds the %d bytes after it (truncated file?)", n, avail)}
	case n < 2:
		return nil, &Error{File: path, Err: fmt.Errorf("header length %d is too short for a JSON object", n)}
	}
	hdrEnd := headerLenSize + int(n)
	data := buf[hdrEnd:]
	h, err := ParseHeader(buf[headerLenSize:hdrEnd], int64(len(data)))
	if err != nil {
		var se *Error
		if errors.As(err, &se) {
			se.File = path
		}
		return nil, err
	}
	f := &File{path: path, header: h, data: data, byName: make(map[string]int, len(h.Tensors))}
	for i, t := range h.Tensors {
		f.byName[t.Name] = i
	}
	return f, nil
}

// Close releases the file's memory. Tensor data obtained from it must not be
// used afterwards.
func (f *File) Close() error {
	f.data = nil
	if f.unmap != nil {
		u := f.unmap
		f.unmap = nil
		if err := u(); err != nil {
			return &Error{File: f.path, Err: fmt.Errorf("munmap: %w", err)}
		}
	}
	return nil
}

// Path returns the path (or name) the file was opened with.
func (f *File) Path() string { return f.path }

// Mapped reports whether the file's data is memory-mapped (rather than read).
func (f *File) Mapped() bool { return f.unmap != nil }

// Metadata returns the header's "__metadata__" map (nil if absent). The
// caller must not modify it.
func (f *File) Metadata() map[string]string { return f.header.Metadata }

// Tensors returns the descriptions of all tensors, sorted by name. The
// caller must not modify them.
func (f *File) Tensors() []TensorInfo { return f.header.Tensors }

// Info returns the description of the named tensor.
func (f *File) Info(name string) (TensorInfo, bool) {
	i, ok := f.byName[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.header.Tensors[i], true
}

// Tensor returns the named tensor with a view of its bytes.
func (f *File) Tensor(name string) (Tensor, error) {
	i, ok := f.byName[name]
	if !ok {
		return Tensor{}, &Error{File: f.path, Tensor: name, Err: errors.New("not in file")}
	}
	if f.data == nil {
		return Tensor{}, &Error{File: f.path, Tensor: name, Err: errors.New("file is closed")}
	}
	info := f.header.Tensors[i]
	return Tensor{TensorInfo: info, File: f.path, Data: f.data[info.Begin:info.End:info.End]}, nil
}

// Tensor is a tensor of a file: its description and a view of its bytes
// (little-endian, row-major), valid until the file is closed.
type Tensor struct {
	TensorInfo
	File string // the file holding it, for error messages
	Data []byte
}

// Float32 returns the tensor's elements converted to float32. F16 and BF16
// convert exactly; other dtypes give an error naming the tensor and dtype.
func (t *Tensor) Float32() ([]float32, error) {
	if t.DType.Size() == 0 {
		return nil, &Error{File: t.File, Tensor: t.Name, Err: fmt.Errorf("%w %q", ErrUnsupportedDType, t.DType)}
	}
	out := make([]float32, len(t.Data)/t.DType.Size())
	if err := DecodeFloat32(out, t.Data, t.DType); err != nil {
		return nil, &Error{File: t.File, Tensor: t.Name, Err: err}
	}
	return out, nil
}
