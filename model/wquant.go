package model

import (
	"fmt"
	"slices"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/model/safetensors"
	"github.com/bitdecode/bitdecode/wq"
)

// WeightMemory is what a model's weights take in their formats: packed
// codes and params for quantized linear layers, 2 bytes per element for
// everything kept in 16 bits (embeddings, norms, LM head). It counts the
// format, not how a backend stores it (the CPU backend reads 16-bit and
// int8 checkpoint weights as stored; a GPU backend may convert them).
type WeightMemory struct {
	Format    string `json:"format"`                // the linear layers' format ("int4:g128:rtn"), or the stored matrices' ("bf16", "fp16", "bf16+int8")
	Bytes     int64  `json:"bytes"`                 // all weights as stored (a tied LM head counted once)
	FP16Bytes int64  `json:"fp16_bytes"`            // the same weights in fp16
	DECBytes  int64  `json:"dec_bytes,omitempty"`   // DEC residuals (host memory on a GPU), 0 without DEC
	DECKChunk int    `json:"dec_k_chunk,omitempty"` // k_chunk of DEC, 0 without (or when set per shape)
	// DECPerLayer is k_chunk by linear layer ("q_proj", "down_proj") when
	// LoadOptions.DECByShape set it (by shape, then q, k and v agreed:
	// decByLayer) or LoadOptions.DECByLayer did, nil otherwise.
	DECPerLayer map[string]int `json:"dec_k_chunk_per_layer,omitempty"`
}

// WeightReporter is implemented by models that account their weights.
type WeightReporter interface {
	// WeightMemory returns the model's weight memory.
	WeightMemory() WeightMemory
}

// WeightMemoryOf returns m's weight memory, or the zero value if m does not
// report it.
func WeightMemoryOf(m Model) WeightMemory {
	if r, ok := m.(WeightReporter); ok {
		return r.WeightMemory()
	}
	return WeightMemory{}
}

// decodeFloat32 widens little-endian F32, F16 or BF16 data to float32
// (safetensors.DecodeFloat32, whose dtypes bear backend's names).
func decodeFloat32(dt backend.DType, data []byte) ([]float32, error) {
	sz := dt.Size()
	if sz == 0 || dt == backend.I32 || len(data)%sz != 0 {
		return nil, fmt.Errorf("cannot widen %d bytes of %v", len(data), dt)
	}
	out := make([]float32, len(data)/sz)
	return out, safetensors.DecodeFloat32(out, data, safetensors.DType(dt.String()))
}

// decChoice returns the DEC of linear weight name [N, K] by the load
// options (DECKChunk, DECByLayer, the per-tensor choices of DECByShape or
// DECByLayer) and records it in the per-layer accounting where those set it.
func (ld *loader) decChoice(name string, N, K int) DECChoice {
	o := ld.opts
	choice := DECChoice{KChunk: o.DECKChunk}
	if o.DECByLayer != nil {
		choice = DECChoice{KChunk: o.DECByLayer[kindOf(name)]}
	}
	if c, ok := ld.decNamed[name]; ok {
		choice = c
	} else if c, ok := o.DECByShape[Shape{N, K}]; ok {
		choice = c
	}
	if o.DECByShape != nil || o.DECByLayer != nil {
		if ld.mem.DECPerLayer == nil {
			ld.mem.DECPerLayer = map[string]int{}
		}
		ld.mem.DECPerLayer[kindOf(name)] = choice.KChunk
	}
	return choice
}

// kindOf is the kind of a linear weight's tensor name ("q_proj").
func kindOf(name string) string {
	_, kind := linearKind(name)
	return kind
}

// loadLinear quantizes one linear layer's weight [N, K] to the load
// options' format (head: the LM head, to wq.Spec.HeadSpec, without DEC)
// and hands it to the backend: packed through backend.QuantWeightLoader, or
// dequantized to float32 through LoadWeight where the backend has no
// low-bit Linear (said once on the log).
func (ld *loader) loadLinear(name string, shape []int, dt backend.DType, data []byte, split backend.Split, head bool) (backend.Weight, error) {
	o := ld.opts
	m := o.Quantized[name]
	if head {
		o.Weights = o.Weights.HeadSpec()
		if ld.tiedHead != nil && name == tiedEmbedName {
			m = ld.tiedHead
		}
	}
	N, K := shape[0], shape[1]
	// The values in float32, for quantizing and for a DEC residual only (a
	// cached matrix without DEC needs none).
	var w []float32
	widen := func() (err error) {
		if w == nil {
			if w, err = decodeFloat32(dt, data); err != nil {
				err = fmt.Errorf("model: tensor %q: %w", name, err)
			}
		}
		return err
	}
	var err error
	switch {
	case m != nil:
		if m.N != N || m.K != K || m.Elem != o.Weights.Elem || m.Group != o.Weights.Group {
			return nil, fmt.Errorf("model: tensor %q: the cached matrix is [%d, %d] %v g%d, want [%d, %d] %s", name, m.N, m.K, m.Elem, m.Group, N, K, o.Weights)
		}
	case o.Weights.Method == wq.GPTQ:
		h := o.Calib[name]
		if h == nil {
			return nil, fmt.Errorf("model: tensor %q: no calibration statistics for GPTQ (give a calibration text: --calib FILE)", name)
		}
		if err = widen(); err == nil {
			m, err = wq.QuantizeGPTQ(o.Weights.Elem, o.Weights.Group, N, K, w, h, wq.GPTQOptions{ActOrder: o.Weights.ActOrder})
		}
	default:
		if err = widen(); err == nil {
			m, err = wq.Quantize(o.Weights.Elem, o.Weights.Group, N, K, w)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("model: tensor %q: %w", name, err)
	}
	if o.Quantized != nil {
		o.Quantized[name] = m
	}
	var dec *wq.DEC
	var choice DECChoice // the head has no DEC
	if !head {
		choice = ld.decChoice(name, N, K)
	}
	if choice.KChunk > 0 {
		re := o.DECResidual
		if re == 0 {
			re = wq.Int4
		}
		if err := widen(); err != nil {
			return nil, err
		}
		r, err := wq.NewResidual(w, m, re)
		if err != nil {
			return nil, fmt.Errorf("model: tensor %q: %w", name, err)
		}
		dec = &wq.DEC{R: r, KChunk: choice.KChunk, Blocks: choice.Blocks}
		ld.mem.DECBytes += dec.Bytes()
	}
	ld.mem.Bytes += m.Bytes()
	if qs, ok := ld.be.(backend.QuantSplitLoader); ok {
		qw, err := qs.LoadQuantWeightSplit(name, m, dec, split)
		if err != nil {
			return nil, fmt.Errorf("model: %w", err)
		}
		return qw, nil
	}
	if ql, ok := ld.be.(backend.QuantWeightLoader); ok {
		qw, err := ql.LoadQuantWeight(name, m, dec)
		if err != nil {
			return nil, fmt.Errorf("model: %w", err)
		}
		return qw, nil
	}
	if dec != nil {
		return nil, fmt.Errorf("model: tensor %q: backend %s cannot run DEC (it has no low-bit Linear); drop --dec-k or use --device cpu", name, ld.be.Name())
	}
	if !ld.fallbackSaid && o.Log != nil {
		fmt.Fprintf(o.Log, "model: backend %s has no low-bit Linear: %s weights are dequantized to float32 (the format's accuracy, not its memory or speed)\n", ld.be.Name(), o.Weights.Short())
	}
	ld.fallbackSaid = true
	deq := m.DequantBytes()
	if sl, ok := ld.be.(backend.SplitLoader); ok {
		return sl.LoadWeightSplit(name, backend.F32, slices.Clone(shape), deq, split)
	}
	return ld.be.LoadWeight(name, backend.F32, slices.Clone(shape), deq)
}
