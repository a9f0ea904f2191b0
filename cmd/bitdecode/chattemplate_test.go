package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestChatTemplateFlag runs the embedded model with --chat-template: a Jinja
// file, a built-in format, a template that does not compile (its line
// named) and a missing file.
func TestChatTemplateFlag(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.jinja")
	bad := filepath.Join(dir, "bad.jinja")
	if err := os.WriteFile(good, []byte("{{ messages[0].content }} // "), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("x\n{% if %}"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"run", "--device", "cpu", "--max-tokens", "2", "--compare-fp16=false", "--quiet", "--chat"}
	tests := []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{[]string{"--chat-template", good, "func main"}, 0, "func main", ""},
		{[]string{"--chat-template", "plain", "func main"}, 0, "func main", ""},
		{[]string{"--chat-template", bad, "x"}, 1, "", "line 2"},
		{[]string{"--chat-template", filepath.Join(dir, "none.jinja"), "x"}, 2, "", "want a Jinja file or llama3"},
	}
	for _, tc := range tests {
		var out, errb bytes.Buffer
		code := runMain(append(append([]string{}, base...), tc.args...), &out, &errb)
		if code != tc.code || !strings.Contains(out.String(), tc.stdout) || !strings.Contains(errb.String(), tc.stderr) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit %d, stdout ~%q, stderr ~%q",
				tc.args, code, out.String(), errb.String(), tc.code, tc.stdout, tc.stderr)
		}
	}
}
