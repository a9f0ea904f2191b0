package tokenizer

import (
	"errors"
	"fmt"
)

// ErrUnsupported is wrapped by every LoadError that rejects a component this
// package does not implement (a WordPiece model, a Precompiled normalizer, ...).
// Test for it with errors.Is.
var ErrUnsupported = errors.New("unsupported")

// LoadError reports a tokenizer file that cannot be used: malformed JSON, a
// missing or mistyped field, a value out of range, or an unsupported component.
// It names the file and the JSON path of the offending field, in the manner of
// strconv.NumError.
type LoadError struct {
	File  string // base name of the file, e.g. "tokenizer.json"
	Field string // JSON path, e.g. "model.merges[12]"; empty for the whole file
	Err   error  // the cause
}

// Error implements error.
func (e *LoadError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("tokenizer: %s: %v", e.File, e.Err)
	}
	return fmt.Sprintf("tokenizer: %s: %s: %v", e.File, e.Field, e.Err)
}

// Unwrap returns the cause.
func (e *LoadError) Unwrap() error { return e.Err }

// unsupported builds the cause for a component kind this package rejects.
func unsupported(kind, name, supported string) error {
	return fmt.Errorf("%w %s %q (supported: %s)", ErrUnsupported, kind, name, supported)
}
