package model

import (
	"errors"
	"fmt"
	"math"

	"github.com/bitdecode/bitdecode/backend"
)

// Batch is the set of new tokens that one Forward call processes: the
// tokens of one or more sequences, each sequence's tokens contiguous and in
// order. A sequence's new tokens continue what the KV cache already holds
// for it: the first is at position Pos, the next at Pos+1, and so on. A
// prefill is a sequence with Pos 0 and many tokens; a decode step is one
// token per sequence.
type Batch struct {
	// Tokens holds the token ids of all sequences, Seqs[0]'s first.
	Tokens []int32
	// Seqs describes which tokens belong to which sequence, in the order of
	// Tokens.
	Seqs []Seq
	// AllLogits asks Forward for the logits of every token (for perplexity);
	// otherwise it returns those of the last token of each sequence. With
	// AllLogits every row is downloaded whole, whatever Seq.Output says.
	AllLogits bool
}

// Output is what Forward returns of a sequence's output row: the whole row
// of logits, or only what a greedy sampler needs of it.
type Output uint8

const (
	// OutputLogits asks for the whole row (the zero value).
	OutputLogits Output = iota
	// OutputToken asks for the row's greedy token alone, Argmax of the
	// logits (Logits.Token): on a backend.Argmaxer the row is reduced on
	// the device and never copied to the host (docs/perf/decode-step.md
	// v23). For a sampler that needs no more: temperature 0, no
	// penalties, bias or log probabilities; or for a row nobody reads
	// (a prefill chunk before the prompt's end).
	OutputToken
)

// Seq is one sequence's share of a Batch.
type Seq struct {
	// ID identifies the sequence to the KV cache, stable across calls.
	ID int
	// Pos is the position of the sequence's first new token, which is the
	// number of tokens the cache already holds for it.
	Pos int
	// Start and Len locate the sequence's new tokens: Tokens[Start:Start+Len].
	Start, Len int
	// Output is what Forward returns of the sequence's output row.
	Output Output
}

// ChunkRuns returns the rows of the batch's prefill chunks: one run per
// sequence that brings more than one token (backend.ChunkRows).
func (b *Batch) ChunkRuns() []backend.RowRun {
	var runs []backend.RowRun
	for _, s := range b.Seqs {
		if s.Len > 1 {
			runs = append(runs, backend.RowRun{Start: s.Start, Len: s.Len})
		}
	}
	return runs
}

// Add appends a sequence's new tokens to the batch.
func (b *Batch) Add(id, pos int, tokens ...int32) {
	b.Seqs = append(b.Seqs, Seq{ID: id, Pos: pos, Start: len(b.Tokens), Len: len(tokens)})
	b.Tokens = append(b.Tokens, tokens...)
}

// Validate checks the batch against a vocabulary of vocab tokens: at least
// one token; sequences contiguous, in order, non-empty, with distinct IDs and
// non-negative positions; every token id in [0, vocab).
func (b *Batch) Validate(vocab int) error {
	if len(b.Tokens) == 0 || len(b.Seqs) == 0 {
		return errors.New("model: empty batch")
	}
	next := 0
	ids := make(map[int]bool, len(b.Seqs))
	for i, s := range b.Seqs {
		switch {
		case s.Start != next:
			return fmt.Errorf("model: batch: sequence %d (id %d) starts at token %d, want %d (sequences must be contiguous and in order)", i, s.ID, s.Start, next)
		case s.Len <= 0:
			return fmt.Errorf("model: batch: sequence %d (id %d) has %d tokens", i, s.ID, s.Len)
		case s.Pos < 0 || int64(s.Pos)+int64(s.Len) > math.MaxInt32:
			return fmt.Errorf("model: batch: sequence %d (id %d) positions [%d, %d) out of range", i, s.ID, s.Pos, s.Pos+s.Len)
		case ids[s.ID]:
			return fmt.Errorf("model: batch: sequence id %d appears twice", s.ID)
		case s.Output > OutputToken:
			return fmt.Errorf("model: batch: sequence %d (id %d) asks for output %d", i, s.ID, s.Output)
		}
		ids[s.ID] = true
		next += s.Len
	}
	if next != len(b.Tokens) {
		return fmt.Errorf("model: batch: sequences cover %d tokens, batch has %d", next, len(b.Tokens))
	}
	for i, t := range b.Tokens {
		if t < 0 || int(t) >= vocab {
			return fmt.Errorf("model: batch: token %d has id %d, outside the vocabulary [0, %d)", i, t, vocab)
		}
	}
	return nil
}

// Positions returns the position of every token of the batch.
func (b *Batch) Positions() []int32 {
	pos := make([]int32, len(b.Tokens))
	for _, s := range b.Seqs {
		for i := range s.Len {
			pos[s.Start+i] = int32(s.Pos + i)
		}
	}
	return pos
}

// OutputRows returns the batch indexes of the tokens whose logits Forward
// returns: the last token of each sequence, or every token with AllLogits.
func (b *Batch) OutputRows() []int32 {
	if b.AllLogits {
		rows := make([]int32, len(b.Tokens))
		for i := range rows {
			rows[i] = int32(i)
		}
		return rows
	}
	rows := make([]int32, len(b.Seqs))
	for i, s := range b.Seqs {
		rows[i] = int32(s.Start + s.Len - 1)
	}
	return rows
}

// Logits holds the output of Forward on the host: for each output row (see
// Batch.OutputRows), its row of Vocab logits or, where the batch asked for
// less (Seq.Output), its greedy token.
type Logits struct {
	Vocab int
	// Data holds the rows downloaded whole, row-major, in output-row
	// order: every row's (Rows() × Vocab) unless a sequence asked for its
	// token alone and the backend picked it on the device.
	Data []float32
	// Tokens holds every output row's greedy token (Argmax of its logits)
	// where the backend picked them on the device; nil otherwise (Token
	// then picks from Data).
	Tokens []int32
	// rowOf maps output row i to its row of Data (-1: not downloaded);
	// nil: row i is Data's row i.
	rowOf []int32
}

// Argmax returns the index of the largest value of x, the first of equal
// ones: greedy decoding's token. A NaN is never larger than anything, so a
// NaN at index 0 wins; x must not be empty. backend.Argmaxer's ArgmaxRows
// computes the same on the device.
func Argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

// Rows returns the number of output rows.
func (l *Logits) Rows() int {
	if l.rowOf != nil {
		return len(l.rowOf)
	}
	return len(l.Data) / l.Vocab
}

// Row returns row i: the logits of the last token of Seqs[i], or of token i
// when the batch asked for AllLogits. It returns nil for a row that was not
// downloaded (its sequence asked for OutputToken): use Token.
func (l *Logits) Row(i int) []float32 {
	k := i
	if l.rowOf != nil {
		if k = int(l.rowOf[i]); k < 0 {
			return nil
		}
	}
	return l.Data[k*l.Vocab : (k+1)*l.Vocab]
}

// Token returns row i's greedy token, Argmax of its logits, whatever its
// sequence asked for.
func (l *Logits) Token(i int) int {
	if l.Tokens != nil {
		return int(l.Tokens[i])
	}
	return Argmax(l.Row(i))
}
