// Package model loads Llama-family Hugging Face checkpoints (Llama 2/3/3.1/
// 3.2, Mistral, Qwen2/2.5, Qwen3, Phi-3/3.5 and Phi-4-mini, Gemma, Granite
// 3.x, OLMo 2, Gemma 3 text) and runs
// their forward pass over a backend.Backend, so the same model code runs on
// any device.
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
// What a family stores differently from the backends' ops is fixed at load
// (loader's tags): Phi-3's fused q|k|v split into rows, Gemma's 1 + w
// norms, and Phi-4-mini's partial rotary embeddings (RoPE on 96 of each
// head's 128 dimensions) as a permutation of q's and k's rows within each
// head with frequency 0 for the pass-through pairs (Config.RotaryDims), so
// that every backend's RoPE, fused GPU paths included, runs them as is.
// Run-time multipliers that follow a linear map are folded into its
// weights at load (attnFolds): Granite's attention, residual and logit
// multipliers into q, o and down, and the final norm, and Gemma 3's
// query_pre_attn_scalar into q_norm; the attention kernels keep their
// 1/√D. The norm layouts are a layer's optional weights: OLMo 2's
// post-norm blocks (no input norm) and Gemma 3's four norms a layer; Gemma
// 3's sliding layers take their own RoPE frequencies.
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
