// Package model loads Llama-family Hugging Face checkpoints (Llama 2/3/3.1/
// 3.2, Mistral, Qwen2/2.5, Qwen3) and runs their forward pass over a
// backend.Backend, so the same model code runs on any device.
//
// Load reads config.json (Config) and the safetensors weights (package
// model/safetensors) into backend-owned weights. Model.Forward takes a Batch
// of new tokens from one or more sequences and returns logits. Attention is
// not computed here: each layer hands its q, k and v to an Attention, the KV
// cache, which stores K and V in its own format and attends. DenseCache is
// the float32 reference implementation; the low-bit caches live elsewhere.
//
// An architecture is one file (llama.go): a weights struct tagged with the
// checkpoint's tensor names and a Forward that reads like the equations.
//
// A typical generation loop:
//
//	be := cpu.New(0)
//	m, err := model.Load(dir, be, model.LoadOptions{Progress: model.StderrProgress()})
//	cache := model.NewDenseCache(be, m.Config())
//	var b model.Batch
//	b.Add(0, 0, prompt...)             // sequence 0, prefill from position 0
//	logits, err := m.Forward(&b, cache)
//	next := logits.Token(0)            // greedy: Argmax(logits.Row(0))
//	b = model.Batch{}
//	b.Add(0, len(prompt), int32(next)) // decode one token
//	b.Seqs[0].Output = model.OutputToken // only its greedy token back
//	logits, err = m.Forward(&b, cache)
package model
