package gpukv

// The check that a decode step replayed from CUDA graphs (backend/gpu's
// graph.go, a step's ops flushed in segments of its own graphs) computes
// the bits of the same step run op by op, through the events that change a
// step's graphs: a sequence joining (a new batch bucket), a sequence
// leaving, prefill chunks beside decodes, and KV block boundaries crossed.

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bitdecode/bitdecode/backend/gpu"
	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/kvcache"
	"github.com/bitdecode/bitdecode/model"
	"github.com/bitdecode/bitdecode/model/gotiny"
)

// TestGPUGraphReplaySameBits runs four greedy sequences of the embedded
// model through a GPU cache step by step (runGreedy) on a backend with CUDA
// graphs off and one with them on (the default), and requires every logits
// row of every sequence to be bitwise the same. The sequences join at
// different steps (batches of 1, 2, 3 and 4 sequences: three decode
// buckets), one leaves early, a two-chunk prefill runs beside decodes, and
// the first sequence's decode crosses its first KV block boundary (int4's
// 128-token residual; int2's 256 for the longest); int4:rot's appends
// rotate q, k and v on the way (KVWriter.AppendRot). The graph backend must
// have replayed graphs, or the test would compare direct runs only.
func TestGPUGraphReplaySameBits(t *testing.T) {
	for _, spec := range []string{"fp16", "int4", "int2", "int4:rot"} {
		t.Run(spec, func(t *testing.T) {
			var rows [2][][][]float32 // [graphs off, on][sequence][step]
			var stats gpu.GraphStats
			for i, noGraphs := range []bool{true, false} {
				be, err := gpu.Open(0, gpu.Options{NoGraphs: noGraphs})
				if err != nil {
					if errors.Is(err, cuda.ErrNoDriver) || errors.Is(err, cuda.ErrNoDevice) {
						t.Skipf("no CUDA device: %v", err)
					}
					t.Fatal(err)
				}
				defer be.Close()
				m, err := gotiny.Load(be, model.LoadOptions{})
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				c, err := NewPaged(be, m.Config(), kv.MustParseSpec(spec), kvcache.Options{MaxSeqs: 4, MaxLen: 640, MaxChunk: invariantChunk})
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				r := rand.New(rand.NewPCG(19, 2))
				vocab := m.Config().Vocab
				seqs := []*greedySeq{
					{id: 0, join: 0, gen: 170, prompt: randomPrompt(r, 100, vocab)},
					{id: 1, join: 6, gen: 60, prompt: randomPrompt(r, 40, vocab)},
					{id: 2, join: 10, gen: 12, prompt: randomPrompt(r, 10, vocab)},
					{id: 3, join: 20, gen: 40, prompt: randomPrompt(r, 2*invariantChunk+3, vocab)},
				}
				runGreedy(t, m, c, seqs)
				for _, s := range seqs {
					rows[i] = append(rows[i], s.rows)
				}
				if !noGraphs {
					stats = be.GraphStats()
				}
			}
			if stats.Replayed == 0 || stats.Captured == 0 {
				t.Fatalf("graphs on: %+v flushes: no graph replayed, nothing to compare", stats)
			}
			t.Logf("graphs on: %+v flushes", stats)
			for s := range rows[0] {
				off, on := rows[0][s], rows[1][s]
				if len(on) != len(off) {
					t.Fatalf("sequence %d: %d logits rows with graphs, %d without", s, len(on), len(off))
				}
				for step := range off {
					if err := sameBits(on[step], off[step]); err != nil {
						t.Fatalf("sequence %d, its step %d: graphs on vs off: %v", s, step, err)
					}
				}
			}
		})
	}
}

// sameBits returns an error naming the first element of got whose bits
// differ from want's.
func sameBits(got, want []float32) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d values, want %d", len(got), len(want))
	}
	for j := range want {
		if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
			return fmt.Errorf("logit %d = %v, want %v", j, got[j], want[j])
		}
	}
	return nil
}
