package engine

import (
	"context"
	"fmt"

	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/kvcache"
	"github.com/bitdecode/bitdecode/model"
)

// FormatRun is one KV format's generation in CompareFormats.
type FormatRun struct {
	Spec  kv.Spec
	Stats Stats
	// Agree is the number of generated tokens equal to the first format's,
	// counted up to the first difference.
	Agree int
	// FullBytes and FullBytesFP16 are what a sequence filling the model's
	// context (MaxPositions tokens; the generated length if unknown) takes
	// in this format and in fp16.
	FullBytes, FullBytesFP16 int64
	Text                     string
}

// CompareFormats generates from the same prompt once per KV format, each in
// a fresh cache sized for the run (SoloCacheOptions), and reports speed,
// memory and agreement with the first format (the baseline, e.g. fp16).
// With greedy sampling and no stop tokens every run generates
// opts.MaxTokens tokens.
func (m *Model) CompareFormats(ctx context.Context, prompt []int, specs []kv.Spec, opts GenerateOptions) ([]FormatRun, error) {
	runs := make([]FormatRun, 0, len(specs))
	for _, spec := range specs {
		c, err := m.NewCache(spec, m.SoloCacheOptions(len(prompt), opts))
		if err != nil {
			return nil, err
		}
		var text []byte
		st, err := Generate(ctx, m.Model, m.Tokenizer, c, 0, prompt, opts, func(s string) { text = append(text, s...) })
		c.Close()
		if err != nil {
			return nil, fmt.Errorf("engine: KV %s: %w", spec, err)
		}
		r := NewFormatRun(c, m.Model, st)
		r.Text = string(text)
		if len(runs) > 0 {
			r.AgreeWith(runs[0].Stats.Tokens)
		}
		runs = append(runs, r)
	}
	return runs, nil
}

// NewFormatRun describes the finished generation st made with cache c; Agree
// is set to all generated tokens (see AgreeWith).
func NewFormatRun(c kvcache.Cache, m model.Model, st Stats) FormatRun {
	r := FormatRun{Spec: c.Format().Spec, Stats: st, Agree: len(st.Tokens)}
	full := m.Config().MaxPositions
	if full <= 0 {
		full = st.PromptTokens + st.GeneratedTokens
	}
	r.FullBytes, r.FullBytesFP16 = c.BytesAt(full)
	return r
}

// AgreeWith sets r.Agree to the number of r's generated tokens equal to
// base, up to the first difference.
func (r *FormatRun) AgreeWith(base []int) {
	r.Agree = 0
	for r.Agree < len(r.Stats.Tokens) && r.Agree < len(base) && r.Stats.Tokens[r.Agree] == base[r.Agree] {
		r.Agree++
	}
}

// SoloCacheOptions size the cache of one generation: a single sequence
// holding the prompt and opts.MaxTokens new tokens (at most the model's
// context), prefilled in chunks of opts.ChunkTokens.
func (m *Model) SoloCacheOptions(promptTokens int, opts GenerateOptions) kvcache.Options {
	maxLen := promptTokens + opts.MaxTokens
	if mp := m.Config().MaxPositions; mp > 0 {
		maxLen = min(maxLen, mp)
	}
	return kvcache.Options{MaxSeqs: 1, MaxLen: maxLen, MaxChunk: opts.ChunkTokens}
}
