//go:build unix

package tokenizer

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLoadHostileFiles: a FIFO named tokenizer.json (which blocked Load
// forever) and a link to /dev/zero (which grew memory without end) are
// refused at once, naming the file.
func TestLoadHostileFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, TokenizerFile)
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() { _, err := Load(dir); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") || !strings.Contains(err.Error(), TokenizerFile) {
			t.Errorf("FIFO tokenizer.json: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Load blocked on a FIFO")
	}
	zdir := t.TempDir()
	if err := os.Symlink("/dev/zero", filepath.Join(zdir, TokenizerFile)); err != nil {
		t.Skip(err)
	}
	if _, err := Load(zdir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("tokenizer.json -> /dev/zero: %v", err)
	}
}
