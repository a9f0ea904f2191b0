package main

import (
	"fmt"
	"io"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/kv"
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

// withModelSettings fills the adjustment terms a bw spec leaves open from
// the model's settings (model.LoadSettings; dir "" means defaults) and says
// on stderr, once, which terms a bw spec uses and where they came from.
func withModelSettings(dir string, specs []kv.Spec, stderr io.Writer) ([]kv.Spec, error) {
	st := model.Settings{BW: model.BWSettings{Adj8: -1, Adj4: -1}, From: "defaults"}
	if dir != "" {
		var err error
		if st, err = model.LoadSettings(dir); err != nil {
			return nil, err
		}
	}
	out := make([]kv.Spec, len(specs))
	var a8, a4 string // the terms filled in, for the message
	for i, sp := range specs {
		out[i] = sp.WithAdjust(st.BW.Adj8, st.BW.Adj4)
		r := out[i].Planes.Recon(sp.K.Elem)
		if sp.Planes.On && sp.Planes.Adj8 == kv.AdjUnset && a8 == "" {
			a8 = fmt.Sprintf(" a8=%#x", r.Adj8)
		}
		if sp.Planes.On && sp.Planes.Adj4 == kv.AdjUnset && a4 == "" {
			a4 = fmt.Sprintf(" a4=%#x", r.Adj4)
		}
	}
	if a8+a4 != "" {
		fmt.Fprintf(stderr, "bw adjustment terms a spec leaves open come from the model's settings (%s):%s%s\n", st.From, a8, a4)
	}
	return out, nil
}
