//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package safetensors

import (
	"errors"
	"os"
)

// mmapFile reports that this platform has no mmap; Open reads the file.
func mmapFile(f *os.File, size int64) ([]byte, func() error, error) {
	return nil, nil, errors.New("mmap not supported on this platform")
}
