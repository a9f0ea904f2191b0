//go:build unix

package fileio

import (
	"os"
	"syscall"
)

// openNonblock opens path read-only with O_NONBLOCK, so that opening a FIFO
// returns at once instead of waiting for a writer.
func openNonblock(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}

// clearNonblock puts a regular file back in blocking mode (a no-op for
// regular files on Linux, but reads then behave as on any file).
func clearNonblock(f *os.File) error {
	return syscall.SetNonblock(int(f.Fd()), false)
}
