package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/bitdecode/bitdecode/constrain"
	"github.com/bitdecode/bitdecode/kvcache"
	"github.com/bitdecode/bitdecode/model"
	"github.com/bitdecode/bitdecode/tokenizer"
)

// GenerateOptions configure one generation.
type GenerateOptions struct {
	Sample    SampleOptions
	MaxTokens int      // new tokens at most
	Stop      []string // stop when the text ends with one of these (not emitted)
	// StopIDs end generation when sampled (the tokenizer's EOS-like tokens
	// by default); they are not emitted.
	StopIDs []int
	// ChunkTokens is the prefill chunk (0: the whole prompt at once).
	ChunkTokens int
	// Cached is how many tokens at the start of the prompt the cache already
	// holds for the sequence (a conversation's earlier turns): prefill starts
	// after them. 0: the sequence is new.
	Cached int
	// Constraint, when set, restricts the generated text to the documents
	// of a grammar (package constrain: any JSON object, or a JSON Schema's
	// documents), as Request.Constraint does for the scheduler; the stop
	// tokens end generation only where the document is complete.
	Constraint *constrain.Grammar
}

// Stats describes a finished generation.
type Stats struct {
	PromptTokens, GeneratedTokens int
	Prefill, Decode               time.Duration
	// KVBytes is the cache's memory at the end; KVBytesFP16 what the same
	// tokens take in an fp16 cache.
	KVBytes, KVBytesFP16 int64
	StopReason           string // "stop token", "stop string", "max tokens", "context full"
	Tokens               []int  // the generated ids
}

// DecodeTokensPerSecond returns the decode rate.
func (s Stats) DecodeTokensPerSecond() float64 {
	if s.Decode <= 0 || s.GeneratedTokens <= 1 {
		return 0
	}
	return float64(s.GeneratedTokens-1) / s.Decode.Seconds()
}

// Generate runs prompt (token ids, BOS included) through m with cache c as
// sequence seq and samples up to opts.MaxTokens tokens, calling emit with
// each piece of text as it becomes complete UTF-8.
func Generate(ctx context.Context, m model.Model, tok *tokenizer.Tokenizer, c kvcache.Cache, seq int, prompt []int, opts GenerateOptions, emit func(string)) (Stats, error) {
	st := Stats{PromptTokens: len(prompt)}
	if len(prompt) == 0 {
		return st, fmt.Errorf("engine: empty prompt")
	}
	if err := opts.Sample.Validate(); err != nil {
		return st, err
	}
	if err := checkStops(opts.Stop); err != nil {
		return st, err
	}
	maxPos := m.Config().MaxPositions
	if maxPos > 0 && len(prompt) >= maxPos {
		return st, fmt.Errorf("engine: prompt of %d tokens does not fit the model's context of %d", len(prompt), maxPos)
	}
	if opts.StopIDs == nil {
		opts.StopIDs = tok.StopIDs()
	}
	stop := map[int]bool{}
	for _, id := range opts.StopIDs {
		stop[id] = true
	}
	sampler := NewSampler(opts.Sample)
	var cons *constrain.Matcher
	if opts.Constraint != nil {
		cons = constrain.NewMatcher(opts.Constraint, TokenVocab(tok, m.Config().Vocab), opts.StopIDs)
	}
	stream := tok.NewDecodeStream(tokenizer.DecodeOptions{SkipSpecial: true})
	context := append([]int(nil), prompt...)

	// Prefill in chunks.
	start := time.Now()
	chunk := opts.ChunkTokens
	if chunk <= 0 {
		chunk = len(prompt)
	}
	if opts.Cached < 0 || opts.Cached >= len(prompt) || c.Len(seq) != opts.Cached {
		return st, fmt.Errorf("engine: the cache holds %d tokens of sequence %d, the options say %d of a %d-token prompt", c.Len(seq), seq, opts.Cached, len(prompt))
	}
	var logits *model.Logits
	for pos := opts.Cached; pos < len(prompt); pos += chunk {
		end := min(len(prompt), pos+chunk)
		var b model.Batch
		ids := make([]int32, end-pos)
		for i, t := range prompt[pos:end] {
			ids[i] = int32(t)
		}
		b.Add(seq, pos, ids...)
		if end < len(prompt) {
			b.Seqs[0].Output = model.OutputToken // a row nobody reads
		} else {
			b.Seqs[0].Output = outputOf(sampler, 0, cons)
		}
		var err error
		if logits, err = m.Forward(&b, c); err != nil {
			return st, err
		}
		if err := ctx.Err(); err != nil {
			return st, err
		}
	}
	st.Prefill = time.Since(start)

	// Decode.
	start = time.Now()
	stops := newStopMatcher(opts.Stop)
	for st.GeneratedTokens < opts.MaxTokens {
		var next int
		if cons != nil {
			picked, ok := sampler.SampleConstrained(logits.Row(0), context, st.GeneratedTokens, cons)
			if !ok && cons.Complete() {
				st.StopReason = "stop token"
				break
			}
			if !ok {
				return st, ErrConstraint
			}
			if next = picked.ID; !stop[next] {
				if err := cons.Accept(next); err != nil {
					return st, err
				}
			}
		} else {
			next = sampler.SampleRow(logits, 0, context, st.GeneratedTokens).ID
		}
		if stop[next] {
			st.StopReason = "stop token"
			break
		}
		st.GeneratedTokens++
		st.Tokens = append(st.Tokens, next)
		context = append(context, next)
		// Text that may be the start of a stop string is held back; at a
		// stop, the text is cut where it begins, even inside this token.
		out, hit := stops.add(stream.Step(next))
		emit(out)
		if hit {
			st.StopReason = "stop string"
			break
		}
		if maxPos > 0 && len(context) >= maxPos {
			st.StopReason = "context full"
			break
		}
		if st.GeneratedTokens == opts.MaxTokens {
			st.StopReason = "max tokens"
			break
		}
		var b model.Batch
		b.Add(seq, len(context)-1, int32(next))
		b.Seqs[0].Output = outputOf(sampler, st.GeneratedTokens, cons)
		var err error
		if logits, err = m.Forward(&b, c); err != nil {
			return st, err
		}
		if err := ctx.Err(); err != nil {
			return st, err
		}
	}
	if st.StopReason != "stop string" {
		if out, hit := stops.add(stream.Flush()); hit {
			emit(out)
			st.StopReason = "stop string"
		} else {
			emit(out + stops.flush())
		}
	}
	st.Decode = time.Since(start)
	st.KVBytes, st.KVBytesFP16 = c.Bytes(seq)
	return st, nil
}
