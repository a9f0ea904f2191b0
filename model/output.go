// output.go: what Forward hands back of its output rows (Batch.OutputRows):
// each row's logits, or where its sequence asked only for the greedy token
// (Seq.Output) and the backend can pick it where the logits are
// (backend.Argmaxer), the token alone, so that the rows nobody needs whole
// never cross to the host (docs/perf/decode-step.md v23).

package model

import (
	"fmt"
	"math"

	"github.com/bitdecode/bitdecode/backend"
)

// wholeRows returns the output rows that b wants whole, in order: every
// row with AllLogits, else those of the sequences that ask for
// OutputLogits.
func wholeRows(b *Batch, R int) []int32 {
	if b.AllLogits {
		rows := make([]int32, R)
		for i := range rows {
			rows[i] = int32(i)
		}
		return rows
	}
	var rows []int32
	for i, s := range b.Seqs {
		if s.Output == OutputLogits {
			rows = append(rows, int32(i))
		}
	}
	return rows
}

// readOutputs returns the output rows' share of logits [R, V] that b asks
// for. Where every row is wanted whole, or be cannot pick tokens itself,
// it downloads the whole tensor (Logits.Token then picks on the host);
// otherwise be picks every row's token, and only the rows wanted whole are
// gathered (Rows) and downloaded. a holds the extra tensors.
//
// With softcap c (Config.FinalSoftcap; 0: none) the logits are soft-capped,
// c·tanh(x/c), as transformers caps them before anything reads them: on
// the device before be picks any token or a row is downloaded where be is
// a backend.Softcapper (the CUDA backend, session 23), so its greedy
// tokens come from the capped logits as the host's do (two logits within
// a rounding of each other may tie after a float32 cap: the first wins on
// both); else every downloaded row on the host (softcapLogits).
func readOutputs(be backend.Backend, a *arena, b *Batch, logits backend.Tensor, R, V int, softcap float64) (out *Logits, err error) {
	if sc, ok := be.(backend.Softcapper); ok && softcap != 0 {
		sc.Softcap(logits, float32(softcap)) // where the logits are: before the pick and the downloads
		softcap = 0
	}
	defer func() {
		if err == nil && softcap != 0 {
			softcapLogits(out.Data, softcap)
		}
	}()
	whole := wholeRows(b, R)
	am, ok := be.(backend.Argmaxer)
	if len(whole) == R || !ok {
		out = &Logits{Vocab: V, Data: make([]float32, R*V)}
		if err := be.Download(out.Data, logits); err != nil {
			return nil, err
		}
		return out, nil
	}
	tokens := a.alloc(backend.I32, R)
	var idx, rows backend.Tensor
	if len(whole) > 0 {
		idx = a.alloc(backend.I32, len(whole))
		rows = a.alloc(backend.F32, len(whole), V)
	}
	if a.err != nil {
		return nil, a.err
	}
	out = &Logits{Vocab: V, Tokens: make([]int32, R), rowOf: make([]int32, R)}
	am.ArgmaxRows(tokens, logits)
	for i := range out.rowOf {
		out.rowOf[i] = -1
	}
	if len(whole) > 0 {
		if err := be.UploadInt32(idx, whole); err != nil {
			return nil, err
		}
		be.Rows(rows, logits, idx)
		out.Data = make([]float32, len(whole)*V)
		if err := be.Download(out.Data, rows); err != nil {
			return nil, fmt.Errorf("the %d rows wanted whole: %w", len(whole), err)
		}
		for k, r := range whole {
			out.rowOf[r] = int32(k)
		}
	}
	if err := am.DownloadInt32(out.Tokens, tokens); err != nil {
		return nil, fmt.Errorf("the greedy tokens: %w", err)
	}
	return out, nil
}

// softcapLogits soft-caps the logits x in place, x[i] = c·tanh(x[i]/c),
// in float64 and rounded once (Gemma 2's final_logit_softcapping; c > 0).
// The model layer keeps to plain Go here: attn's SIMD soft-cap serves the
// attention scores, a layer below the model's reach (docs/architecture.md),
// and a row of logits is read once a step.
func softcapLogits(x []float32, c float64) {
	for i, v := range x {
		x[i] = float32(c * math.Tanh(float64(v)/c))
	}
}
