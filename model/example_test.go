package model_test

import (
	"fmt"
	"log"

	"github.com/bitdecode/bitdecode/backend/cpu"
	"github.com/bitdecode/bitdecode/model"
)

// A batch with a prefill of sequence 1 and a decode step of sequence 2,
// whose cache already holds 40 tokens.
func ExampleBatch() {
	var b model.Batch
	b.Add(1, 0, 0, 846, 2185, 201)
	b.Add(2, 40, 268)
	fmt.Println("positions:", b.Positions())
	fmt.Println("logit rows:", b.OutputRows())
	fmt.Println(b.Validate(8192))
	// Output:
	// positions: [0 1 2 3 40]
	// logit rows: [3 4]
	// <nil>
}

// Load a checkpoint and generate greedily with the float32 cache.
func ExampleLoad() {
	be := cpu.New(0)
	m, err := model.Load("shared/models/gocoder-23m", be, model.LoadOptions{Progress: model.StderrProgress()})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	cache := model.NewDenseCache(be, m.Config())

	tokens := []int32{0, 846, 2185, 201} // BOS "package main\n"
	var b model.Batch
	b.Add(0, 0, tokens...)
	for range 16 {
		logits, err := m.Forward(&b, cache)
		if err != nil {
			log.Fatal(err)
		}
		row := logits.Row(0)
		next := int32(0)
		for i, v := range row {
			if v > row[next] {
				next = int32(i)
			}
		}
		tokens = append(tokens, next)
		b = model.Batch{}
		b.Add(0, len(tokens)-1, next)
	}
	fmt.Println(tokens)
}
