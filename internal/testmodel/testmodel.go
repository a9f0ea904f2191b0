// Package testmodel finds the reference checkpoint (gocoder-23m) for tests:
// $BITDECODE_GOCODER_DIR if set, else shared/models/gocoder-23m in the
// nearest parent of the working directory. Tests that need it skip with a
// clear message where it is absent (CI without ../shared).
package testmodel

import (
	"os"
	"path/filepath"
	"testing"
)

// EnvDir overrides where the reference checkpoint is looked for.
const EnvDir = "BITDECODE_GOCODER_DIR"

// Dir returns the reference checkpoint's directory or skips the test.
func Dir(t testing.TB) string {
	t.Helper()
	if dir := os.Getenv(EnvDir); dir != "" {
		return dir
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		p := filepath.Join(dir, "shared", "models", "gocoder-23m")
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skip("shared/models/gocoder-23m not found in any parent of the working directory (set " + EnvDir + "); skipping the real-checkpoint test")
		}
		dir = parent
	}
}
