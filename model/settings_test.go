package model

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadSettings(t *testing.T) {
	dir := t.TempDir()
	s, err := LoadSettings(dir)
	if err != nil || s.BW.Adj8 != -1 || s.BW.Adj4 != -1 || s.From != "defaults" {
		t.Fatalf("no file: %+v, %v; want unset terms from defaults", s, err)
	}
	named := filepath.Join(dir, "gocoder-23m")
	if err := os.Mkdir(named, 0o755); err != nil {
		t.Fatal(err)
	}
	s, err = LoadSettings(named)
	if err != nil || s.BW != builtinSettings["gocoder-23m"] || !strings.HasPrefix(s.From, "built-in") {
		t.Fatalf("built-in: %+v, %v", s, err)
	}
	write := func(body string) {
		if err := os.WriteFile(filepath.Join(named, SettingsFile), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"bw": {"adj8": 112, "adj4": 3072}}`)
	if s, err = LoadSettings(named); err != nil || s.BW.Adj8 != 112 || s.BW.Adj4 != 3072 {
		t.Fatalf("file: %+v, %v; want 112 and 3072 (the file wins over the table)", s, err)
	}
	for _, bad := range []string{`{"bw": {"adj8": 256}}`, `{"bw": {"adj4": -5}}`, `{"bw": [`, `{"bw": {"adj8": "x"}}`} {
		write(bad)
		if _, err := LoadSettings(named); err == nil || !strings.Contains(err.Error(), SettingsFile) {
			t.Errorf("settings %s: error %v, want one naming %s", bad, err, SettingsFile)
		}
	}
}
