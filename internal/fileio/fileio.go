// Package fileio opens the files a user points bitdecode at (checkpoints,
// tokenizers, settings) defensively: only regular files are read, a FIFO or
// device is refused before anything blocks on it, and reads are bounded, so
// that a hostile or mistaken path (a FIFO named config.json, a link to
// /dev/zero) gives an error naming the file instead of a hang or unbounded
// memory.
package fileio

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// ErrNotRegular is returned (wrapped) for a path that is not a regular
// file: a directory, FIFO, socket or device.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is returned (wrapped) for a file over a read limit.
var ErrTooLarge = errors.New("file too large")

// Open opens path for reading if it is a regular file. The file is opened
// without blocking (a FIFO does not wait for a writer) and checked after
// opening, so it cannot be swapped for a FIFO in between.
func Open(path string) (*os.File, error) {
	f, err := openNonblock(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: %w (%v)", path, ErrNotRegular, st.Mode().Type())
	}
	if err := clearNonblock(f); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// ReadFile reads the regular file path, at most limit bytes; a larger file
// is an error wrapping ErrTooLarge.
func ReadFile(path string, limit int64) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size := int64(0)
	if st, err := f.Stat(); err == nil {
		if size = st.Size(); size > limit {
			return nil, fmt.Errorf("%s: %w: %d bytes, at most %d", path, ErrTooLarge, size, limit)
		}
	}
	// Read into a buffer of the file's size (and room to see its end without
	// growing), as os.ReadFile does: io.ReadAll's doublings cost a 33 MB
	// tokenizer.json ~10% of its load.
	r := io.LimitReader(f, limit+1)
	b := make([]byte, 0, size+512)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // the file grew since Stat
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: %w: more than %d bytes", path, ErrTooLarge, limit)
	}
	return b, nil
}
