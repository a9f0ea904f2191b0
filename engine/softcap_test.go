package engine

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/bitdecode/bitdecode/model"
)

// gemma2Fixture is internal/hfcheck's Gemma 2 checkpoint (attention
// soft-capped at 50).
var gemma2Fixture = filepath.Join("..", "internal", "hfcheck", "testdata", "gemma2-swa16-bf16")

// TestOpenSoftcapAnyDevice: since session 23 (branch s23-gemma2gpu) the
// GPU's paged caches soft-cap the attention scores, so Open no longer
// picks or refuses a device by the model's cap: on every device choice a
// soft-capped model (Gemma 2) gets as far as the device allows, and no
// error wraps model.ErrAttnSoftcap (the fixture has no tokenizer, and this
// test no GPU, so Open still fails here, for those reasons).
func TestOpenSoftcapAnyDevice(t *testing.T) {
	registerNoGroupDevice()
	for _, choice := range []string{"cuda", noGroupDevice, "auto", "cpu"} {
		m, err := Open(gemma2Fixture, Options{Device: choice})
		if errors.Is(err, model.ErrAttnSoftcap) {
			t.Errorf("Open(gemma2, --device %s): %v, want no soft-cap refusal", choice, err)
		}
		if err == nil {
			m.Close()
		}
	}
}
