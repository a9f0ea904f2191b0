package fileio

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// TestHostileFiles checks that a FIFO (which blocked os.ReadFile forever), a
// directory and a link to /dev/zero (which grew memory without end) are
// refused at once with an error naming the path, and that a file over the
// limit is refused.
func TestHostileFiles(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok.json")
	if err := os.WriteFile(ok, []byte(`{"a":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(ok, 100); err != nil || string(b) != `{"a":1}` {
		t.Fatalf("regular file: %q %v", b, err)
	}
	if _, err := ReadFile(ok, 3); !errors.Is(err, ErrTooLarge) {
		t.Errorf("over the limit: %v", err)
	}
	if _, err := ReadFile(dir, 100); !errors.Is(err, ErrNotRegular) {
		t.Errorf("directory: %v", err)
	}
	if runtime.GOOS == "windows" {
		return
	}
	fifo := filepath.Join(dir, "config.json")
	if err := mkfifo(fifo); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() { _, err := ReadFile(fifo, 100); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotRegular) {
			t.Errorf("FIFO: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("reading a FIFO blocked")
	}
	zero := filepath.Join(dir, "tokenizer.json")
	if err := os.Symlink("/dev/zero", zero); err == nil {
		if _, err := ReadFile(zero, 1<<20); !errors.Is(err, ErrNotRegular) {
			t.Errorf("link to /dev/zero: %v", err)
		}
	}
}
