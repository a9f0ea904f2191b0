package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"

	"github.com/bitdecode/bitdecode/hub"
)

// modelHelp is the --model flag's help: a directory or a Hub repository.
const modelHelp = "checkpoint: a directory (config.json, *.safetensors, tokenizer.json) or a Hugging Face repository org/name[@revision], found in or downloaded to the Hugging Face cache"

// resolveModel replaces *dir, a --model value, by the directory it names:
// itself when it is empty or exists here; else, when it reads as a Hugging
// Face repository (org/name[@revision]), the repository's snapshot in the
// Hugging Face cache, downloaded first where it is missing or incomplete
// (package hub: HF_TOKEN, HF_HOME, HF_HUB_CACHE, HF_ENDPOINT and
// HF_HUB_OFFLINE as huggingface_hub reads them). It returns the
// repository's id, or "" for a directory. Progress goes to stderr unless
// quiet; Ctrl-C stops a download, which the next run resumes.
func resolveModel(dir *string, stderr io.Writer, quiet bool) (string, error) {
	if *dir == "" {
		return "", nil
	}
	if _, err := os.Stat(*dir); err == nil {
		return "", nil
	}
	ref, ok := hub.ParseRef(*dir)
	if !ok {
		return "", nil // engine.Open says what is missing
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	o := hub.Options{Getenv: func(k string) string { v, _ := lookupEnv(k); return v }}
	if !quiet {
		o.Log = func(format string, args ...any) { fmt.Fprintf(stderr, "hub: "+format+"\n", args...) }
	}
	d, err := hub.Resolve(ctx, ref, o)
	if err != nil {
		return "", fmt.Errorf("--model %s (not a directory here, so a Hugging Face repository): %w", *dir, err)
	}
	*dir = d
	return ref.Repo, nil
}
