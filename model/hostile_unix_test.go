//go:build unix

package model_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/bitdecode/bitdecode/backend/cpu"
	"github.com/bitdecode/bitdecode/internal/fileio"
	"github.com/bitdecode/bitdecode/internal/tinymodel"
	"github.com/bitdecode/bitdecode/model"
)

// TestLoadRefusesHostileFiles: a checkpoint directory whose config.json,
// bitdecode.json or model.safetensors is a FIFO (which blocked the loader
// forever) or a link to /dev/zero (unbounded reads) is refused at once with
// an error naming the file.
func TestLoadRefusesHostileFiles(t *testing.T) {
	for _, name := range []string{"config.json", model.SettingsFile, "model.safetensors"} {
		for _, kind := range []string{"fifo", "devzero"} {
			dir := t.TempDir()
			if err := tinymodel.Write(dir, 1); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, name)
			os.Remove(path)
			var err error
			if kind == "fifo" {
				err = syscall.Mkfifo(path, 0o644)
			} else {
				err = os.Symlink("/dev/zero", path)
			}
			if err != nil {
				t.Skipf("%s: %v", kind, err)
			}
			done := make(chan error, 1)
			go func() {
				if name == model.SettingsFile {
					_, err := model.LoadSettings(dir)
					done <- err
					return
				}
				m, err := model.Load(dir, cpu.New(1), model.LoadOptions{})
				if err == nil {
					m.Close()
				}
				done <- err
			}()
			select {
			case err := <-done:
				if !errors.Is(err, fileio.ErrNotRegular) {
					t.Errorf("%s as a %s: %v, want an error wrapping %v", name, kind, err, fileio.ErrNotRegular)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s as a %s: the loader blocked", name, kind)
			}
		}
	}
}
