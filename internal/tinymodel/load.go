package tinymodel

import (
	"testing"

	"github.com/bitdecode/bitdecode/backend/cpu"
	"github.com/bitdecode/bitdecode/model"
	"github.com/bitdecode/bitdecode/tokenizer"
)

// Load writes the tiny model (seed 1) into a temporary directory of tb and
// loads it on a CPU backend with its tokenizer; the model is closed when
// the test ends.
func Load(tb testing.TB) (model.Model, *tokenizer.Tokenizer, *cpu.Backend) {
	tb.Helper()
	dir := tb.TempDir()
	if err := Write(dir, 1); err != nil {
		tb.Fatal(err)
	}
	be := cpu.New(0)
	m, err := model.Load(dir, be, model.LoadOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { m.Close() })
	tok, err := tokenizer.Load(dir)
	if err != nil {
		tb.Fatal(err)
	}
	return m, tok, be
}
