package engine_test

import (
	"context"
	"fmt"
	"os"

	"github.com/bitdecode/bitdecode/engine"
	"github.com/bitdecode/bitdecode/internal/tinymodel"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/kvcache"
)

// ExampleScheduler serves two requests at once from a paged int4 cache of
// 64 blocks and reads their streams. (The model here is the random tiny
// test model; with a real checkpoint only the directory changes.)
func ExampleScheduler() {
	dir, _ := os.MkdirTemp("", "tiny")
	defer os.RemoveAll(dir)
	if err := tinymodel.Write(dir, 1); err != nil {
		panic(err)
	}
	// One call opens the model on the CPU with a paged int4 KV cache of 64
	// blocks for up to 8 sequences.
	lm, err := engine.Open(dir, engine.Options{Device: "cpu", KV: kv.MustParseSpec("int4:kc32:v32:res32"),
		Cache: &kvcache.Options{MaxSeqs: 8, Blocks: 64}})
	if err != nil {
		panic(err)
	}
	defer lm.Close()
	m, tok, cache := lm.Model, lm.Tokenizer, lm.Cache
	s, _ := engine.NewScheduler(m, tok, cache, engine.SchedulerOptions{PrefillChunk: 64})
	defer s.Close()

	var streams []*engine.Stream
	for _, p := range []string{"func main() {", "package main"} {
		st, err := s.Submit(context.Background(), engine.Request{Prompt: tok.Encode(p, true), MaxTokens: 10, StopIDs: []int{}})
		if err != nil {
			panic(err)
		}
		streams = append(streams, st)
	}
	for _, st := range streams {
		for {
			_, done, _ := st.Next(context.Background())
			if done {
				break
			}
		}
		r := st.Result()
		fmt.Printf("%s after %d tokens (prompt %d)\n", r.FinishReason, r.CompletionTokens, r.PromptTokens)
	}
	fmt.Println("blocks free:", cache.FreeBlocks() == cache.TotalBlocks())
	// Output:
	// length after 10 tokens (prompt 14)
	// length after 10 tokens (prompt 13)
	// blocks free: true
}
