package bench

// The sizing arithmetic of tensor parallelism for the model benchmark: what
// one rank of a group of TP GPUs holds and reads per decode step (the
// Megatron split backend/tp makes: query heads, KV heads, the MLP's
// intermediate dimension and the vocabulary divided by TP, a KV head kept
// on TP/Hkv ranks when there are fewer KV heads than ranks), and from that
// whether a shape fits a GPU and at which degree.

import (
	"fmt"
	"io"
	"slices"

	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/model"
	"github.com/bitdecode/bitdecode/wq"
)

// TPDegrees are the tensor-parallel degrees the sizing considers, as the
// GPUs of one host come: 1, 2, 4 or 8.
var TPDegrees = []int{1, 2, 4, 8}

// Rank is what one rank of a tensor-parallel group of a model holds.
type Rank struct {
	TP      int // ranks in the group
	Heads   int // query heads per rank (Hq/TP)
	KVHeads int // KV heads per rank (Hkv/TP, or 1 when each is replicated)
	// KVReplicas is how many ranks hold each KV head (TP/Hkv when Hkv <
	// TP, else 1).
	KVReplicas   int
	Intermediate int // the MLP's intermediate columns per rank (I/TP)
	// Vocab is the largest rank's vocabulary rows (the split may be
	// uneven: ceil(V/TP)).
	Vocab int
	// WeightBytesRead is the bytes of matrices a decode step reads on the
	// rank: every linear layer's shard (in the weight format) and the
	// lm_head's rows (packed where the format quantizes the head, fp16
	// otherwise and at TP > 1; the embedding lookup reads one row per
	// token).
	WeightBytesRead int64
	// WeightMemory is the rank's weight memory: WeightBytesRead, the
	// embedding table's shard when it is not tied to the lm_head, and the
	// float32 norms.
	WeightMemory int64
}

// RankOf returns what one rank of a TP-rank group holds of the model c
// with linear layers in format w, or an error naming the numbers that do
// not split (the same rules backend/tp applies at load).
func RankOf(c *model.Config, w wq.Spec, tp int) (Rank, error) {
	switch {
	case tp < 1:
		return Rank{}, fmt.Errorf("bench: tensor-parallel degree %d: want at least 1", tp)
	case c.Heads%tp != 0:
		return Rank{}, fmt.Errorf("bench: --tp %d does not divide the model's %d query heads", tp, c.Heads)
	case c.KVHeads%tp != 0 && tp%c.KVHeads != 0:
		return Rank{}, fmt.Errorf("bench: --tp %d and the model's %d KV heads: one must divide the other", tp, c.KVHeads)
	case c.Intermediate%tp != 0:
		return Rank{}, fmt.Errorf("bench: --tp %d does not divide the MLP's intermediate size %d", tp, c.Intermediate)
	}
	r := Rank{TP: tp, Heads: c.Heads / tp, KVHeads: max(c.KVHeads/tp, 1), KVReplicas: max(tp/c.KVHeads, 1),
		Intermediate: c.Intermediate / tp, Vocab: (c.Vocab + tp - 1) / tp}
	H, D := c.Hidden, c.HeadDim
	qd, kvd := r.Heads*D, r.KVHeads*D
	if w.IsQuantized() {
		// The row-split matrices (o, down) are cut along K: each rank's
		// part must hold whole quantization groups.
		for _, k := range []struct {
			name string
			K    int
		}{{"o_proj", qd}, {"down_proj", r.Intermediate}} {
			if err := wq.Check(w.Elem, w.Group, H, k.K); err != nil {
				return Rank{}, fmt.Errorf("bench: --tp %d with %s weights: %s's %d input columns per rank: %w", tp, w, k.name, k.K, err)
			}
		}
	}
	mat := func(n, k int) int64 {
		if w.IsQuantized() {
			return wq.Bytes(w.Elem, w.Group, n, k)
		}
		return fp16Bytes * int64(n) * int64(k)
	}
	perLayer := mat(qd, H) + 2*mat(kvd, H) + mat(H, qd) + 2*mat(r.Intermediate, H) + mat(H, r.Intermediate)
	embed := fp16Bytes * int64(r.Vocab) * int64(H)
	lmHead := embed
	if w.IsQuantized() && w.HeadQuantized() && tp == 1 { // model.Load keeps a vocabulary-split head 16-bit
		lmHead = wq.Bytes(w.Head, w.Group, r.Vocab, H)
	}
	r.WeightBytesRead = int64(c.Layers)*perLayer + lmHead
	r.WeightMemory = r.WeightBytesRead + f32Bytes*int64(2*c.Layers+1)*int64(H)
	if !c.TieWordEmbeddings || lmHead != embed {
		r.WeightMemory += embed // the embedding table's shard (a tied head's quantized copy beside it)
	}
	return r, nil
}

// fp16Bytes and f32Bytes are the sizes of one element.
const (
	fp16Bytes = 2
	f32Bytes  = 4
)

// decodeSplitTokens is the decode attention's split length whose
// float32 partial results maxBatch and SeqBytes count as workspace.
const decodeSplitTokens = 512

// SeqBytes is the memory one sequence of l tokens in KV format f takes on
// each rank: its packed blocks and fp16 residual slot per layer and KV head
// of the rank, and the decode workspace (the partial outputs of each
// 512-token split: 8 float32 rows of D per KV head, the attention kernels'
// bound).
func (r Rank) SeqBytes(c *model.Config, f kv.Format, l int) int64 {
	nr := f.Residual
	blocks := int64((l + nr - 1) / nr)
	return int64(c.Layers*r.KVHeads)*(blocks*int64(f.BlockBytes())+int64(nr*c.HeadDim*fp16Bytes*2)) +
		int64(r.KVHeads)*int64((l+decodeSplitTokens-1)/decodeSplitTokens)*8*int64(c.HeadDim)*f32Bytes
}

// KVBytesRead is the bytes of KV cache a decode step reads on the rank for
// one sequence of l cached tokens.
func (r Rank) KVBytesRead(c *model.Config, f kv.Format, l int) int64 {
	return int64(c.Layers*r.KVHeads) * f.ReadBytes(l)
}

// gpuReserve is the device memory the sizing leaves for activations,
// split-KV workspaces and the CUDA context (and NCCL's buffers with TP).
const gpuReserve = 3 << 30

// Fits reports whether the rank's weights, one sequence of l tokens in f
// and the reserve fit in memBytes of GPU memory, and the bytes it needs.
func (r Rank) Fits(c *model.Config, f kv.Format, l int, memBytes int64) (bool, int64) {
	need := r.WeightMemory + r.SeqBytes(c, f, l) + gpuReserve
	return need <= memBytes, need
}

// MinTP returns the smallest degree of TPDegrees at which the model with
// weights w and one sequence of l tokens in f fits GPUs of memBytes each,
// or 0 if none does (or none splits).
func MinTP(c *model.Config, w wq.Spec, f kv.Format, l int, memBytes int64) int {
	for _, tp := range TPDegrees {
		r, err := RankOf(c, w, tp)
		if err != nil {
			continue
		}
		if ok, _ := r.Fits(c, f, l, memBytes); ok {
			return tp
		}
	}
	return 0
}

// FitError says that the model does not fit a GPU at degree r.TP, what it
// needs and, where one exists, the degree at which it fits: "needs --tp 2".
func FitError(preset string, c *model.Config, w wq.Spec, f kv.Format, l int, r Rank, memBytes int64) error {
	_, need := r.Fits(c, f, l, memBytes)
	msg := fmt.Sprintf("bench: %s with %s weights and one %d-token %s sequence needs %.1f GiB per GPU at --tp %d (weights %.1f GiB, KV %.2f GiB, reserve %d GiB); a GPU has %.1f GiB free",
		preset, w.Short(), l, f.Spec.String(), gib(need), r.TP, gib(r.WeightMemory), gib(r.SeqBytes(c, f, l)), gpuReserve>>30, gib(memBytes))
	if tp := MinTP(c, w, f, l, memBytes); tp > r.TP {
		return fmt.Errorf("%s: needs --tp %d", msg, tp)
	}
	return fmt.Errorf("%s: does not fit at any --tp of %v", msg, TPDegrees)
}

func gib(b int64) float64 { return float64(b) / (1 << 30) }

// TableGPUBytes is the GPU memory the preset table assumes: an 80 GB
// H100's, about 78 GiB free to a process (the device notes).
const TableGPUBytes = 78 << 30

// tableContext and tableKV are the sequence the preset table sizes: 32K
// tokens of int4.
const tableContext = 32 << 10

var tableKV = kv.MustParseSpec("int4")

// WritePresetTable writes the presets' shapes and sizes as a Markdown
// table: parameters, the weight bytes in fp16 and int4, the KV bytes per
// token, and the least --tp at which fp16 or int4 weights and one 32K int4
// sequence fit GPUs of memBytes each ("needs --tp 2").
func WritePresetTable(w io.Writer, memBytes int64) error {
	f, err := tableKV.Resolve(128)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "| preset | layers | hidden | heads q/kv | intermediate | vocab | params | fp16 weights | int4 weights | KV/token fp16, int4 | fp16 weights on %.0f GiB GPUs | int4 weights |\n", gib(memBytes))
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|")
	names := PresetNames()
	slices.SortFunc(names, func(a, b string) int { return presetParams(a) - presetParams(b) })
	for _, name := range names {
		c, err := model.ParseConfig([]byte(Presets[name]))
		if err != nil {
			return fmt.Errorf("bench: preset %s: %w", name, err)
		}
		if f, err = tableKV.Resolve(c.HeadDim); err != nil {
			return err
		}
		fp16 := wq.Spec{}
		int4, err := wq.ParseSpec("int4")
		if err != nil {
			return err
		}
		r16, err := RankOf(c, fp16, 1)
		if err != nil {
			return err
		}
		r4, err := RankOf(c, int4, 1)
		if err != nil {
			return err
		}
		fp16KV, err := kv.MustParseSpec("fp16").Resolve(c.HeadDim)
		if err != nil {
			return err
		}
		perTok := func(f kv.Format) float64 { return float64(c.Layers*c.KVHeads) * f.BytesPerToken() / 1024 }
		fmt.Fprintf(w, "| %s | %d | %d | %d/%d | %d | %d | %.1fB | %.1f GB | %.1f GB | %.0f KiB, %.0f KiB | %s | %s |\n",
			name, c.Layers, c.Hidden, c.Heads, c.KVHeads, c.Intermediate, c.Vocab, float64(paramCount(c))/1e9,
			float64(r16.WeightMemory)/1e9, float64(r4.WeightMemory)/1e9, perTok(fp16KV), perTok(f),
			fitNote(c, fp16, f, memBytes), fitNote(c, int4, f, memBytes))
	}
	return nil
}

// fitNote says at which degree a shape fits: "one GPU", "needs --tp 2".
func fitNote(c *model.Config, w wq.Spec, f kv.Format, memBytes int64) string {
	switch tp := MinTP(c, w, f, tableContext, memBytes); tp {
	case 0:
		return fmt.Sprintf("does not fit at --tp %d", TPDegrees[len(TPDegrees)-1])
	case 1:
		return "one GPU"
	default:
		return fmt.Sprintf("needs --tp %d", tp)
	}
}

// paramCount is the model's parameter count: embeddings, the lm_head when
// not tied, every linear layer and the norms.
func paramCount(c *model.Config) int64 {
	H, I, qd, kvd := int64(c.Hidden), int64(c.Intermediate), int64(c.Heads*c.HeadDim), int64(c.KVHeads*c.HeadDim)
	perLayer := qd*H + 2*kvd*H + H*qd + 3*I*H + 2*H
	n := int64(c.Layers)*perLayer + int64(c.Vocab)*H + H
	if !c.TieWordEmbeddings {
		n += int64(c.Vocab) * H
	}
	return n
}

// presetParams orders presets by size (a preset that does not parse sorts
// first).
func presetParams(name string) int {
	c, err := model.ParseConfig([]byte(Presets[name]))
	if err != nil {
		return 0
	}
	return int(paramCount(c) / 1e6)
}
