package main

import (
	"fmt"
	"io"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/model"
	"github.com/bitdecode/bitdecode/model/gotiny"
	"github.com/bitdecode/bitdecode/tokenizer"
)

// openModel loads the checkpoint in dir, or the embedded default model
// (model/gotiny) when dir is "", saying so in one line on stderr unless
// quiet, with opts (weight format, DEC, progress bar). It returns the model, its tokenizer and a name for messages.
func openModel(dir string, be backend.Backend, opts model.LoadOptions, stderr io.Writer, quiet bool) (model.Model, *tokenizer.Tokenizer, string, error) {
	if dir == "" {
		if !quiet {
			fmt.Fprintf(stderr, "no --model given: using the embedded model %s; --model DIR runs a Hugging Face checkpoint\n", gotiny.Describe())
		}
		tok, err := gotiny.Tokenizer()
		if err != nil {
			return nil, nil, "", err
		}
		opts.Progress = nil // 2 MB: no bar
		m, err := gotiny.Load(be, opts)
		if err != nil {
			return nil, nil, "", err
		}
		return m, tok, gotiny.Name, nil
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return nil, nil, "", err
	}
	m, err := model.Load(dir, be, opts)
	if err != nil {
		return nil, nil, "", fmt.Errorf("%w (is %s a Hugging Face checkpoint directory?)", err, dir)
	}
	return m, tok, dir, nil
}
