package engine

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bitdecode/bitdecode/model"
)

// gemma2Fixture is internal/hfcheck's Gemma 2 checkpoint (attention
// soft-capped at 50).
var gemma2Fixture = filepath.Join("..", "internal", "hfcheck", "testdata", "gemma2-swa16-bf16")

// TestDeviceForSoftcap: a model whose attention scores are soft-capped
// (Gemma 2) is refused on a named non-CPU device with an error naming the
// feature, before anything is opened; "auto" runs it on the CPU; the CPU
// takes it as asked; a model without the cap keeps the choice.
func TestDeviceForSoftcap(t *testing.T) {
	registerNoGroupDevice()
	for _, choice := range []string{"cuda", noGroupDevice} {
		_, err := Open(gemma2Fixture, Options{Device: choice})
		if !errors.Is(err, model.ErrAttnSoftcap) || !strings.Contains(err.Error(), "--device "+choice) ||
			!strings.Contains(err.Error(), "attn_logit_softcapping") {
			t.Errorf("Open(gemma2, --device %s): %v, want a refusal naming attention logit soft-capping", choice, err)
		}
	}
	var log bytes.Buffer
	m := &Model{log: &log}
	for _, choice := range []string{"", "auto", "cpu"} {
		got, err := m.deviceFor(gemma2Fixture, choice)
		if err != nil || got != "cpu" {
			t.Errorf("deviceFor(gemma2, %q) = %q, %v; want cpu", choice, got, err)
		}
	}
	// No accelerator is linked into this test: auto picks the CPU without
	// a line about the cap.
	if log.Len() != 0 {
		t.Errorf("log %q, want nothing where no GPU would have run", log.String())
	}
	dir := t.TempDir()
	cfg, err := os.ReadFile(filepath.Join(gemma2Fixture, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	plain := strings.Replace(string(cfg), `"attn_logit_softcapping": 50.0`, `"attn_logit_softcapping": null`, 1)
	if plain == string(cfg) {
		t.Fatal("the fixture's config has no attn_logit_softcapping of 50.0")
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(plain), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := m.deviceFor(dir, "cuda"); err != nil || got != "cuda" {
		t.Errorf("deviceFor(gemma2 without the attention cap, cuda) = %q, %v; want cuda", got, err)
	}
}
