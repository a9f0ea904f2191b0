package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenWrongModelPaths checks what Open says of paths that are not a
// checkpoint directory (before, each was reported as a tokenizer error).
func TestOpenWrongModelPaths(t *testing.T) {
	dir := t.TempDir()
	gguf := filepath.Join(dir, "model.Q4_K_M.gguf")
	cfg := filepath.Join(dir, "config.json")
	for _, f := range []string{gguf, cfg} {
		if err := os.WriteFile(f, []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	empty := t.TempDir()
	for _, tc := range []struct{ path, want string }{
		{"meta-llama/Llama-3.2-1B", "hub id"},
		{filepath.Join(dir, "nope"), "does not exist"},
		{gguf, "GGUF"},
		{cfg, "give the directory that holds it: --model " + dir},
		{empty, "has no config.json"},
	} {
		_, err := Open(tc.path, Options{Device: "cpu"})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%q): %v, want an error saying %q", tc.path, err, tc.want)
		}
	}
}
