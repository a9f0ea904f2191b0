//go:build !unix

package fileio

import "errors"

// mkfifo reports that this platform has no named pipes in the file system.
func mkfifo(string) error { return errors.New("no FIFOs on this platform") }
