package model

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/model/safetensors"
	"github.com/bitdecode/bitdecode/wq"
)

// Model is a loaded model: its config and a forward pass over a backend.
type Model interface {
	// Config returns the model's hyperparameters. The caller must not
	// modify them.
	Config() *Config
	// Forward runs the batch's new tokens through the model, handing each
	// layer's q, k and v to attn, and returns the logits of the last token of
	// each sequence (of every token with b.AllLogits): the whole row, or
	// where the sequence asks for OutputToken its greedy token
	// (Logits.Token; the row itself then may not be there).
	Forward(b *Batch, attn Attention) (*Logits, error)
	// Close frees the model's weights on its backend.
	Close() error
}

// LoadOptions tunes Load.
type LoadOptions struct {
	// Progress receives a progress bar while weights load (carriage
	// returns, one final newline); nil loads silently. See StderrProgress.
	Progress io.Writer
	// Weights is the format of the linear layers (q, k, v, o, gate, up,
	// down: the fields tagged quant:"linear"), quantized at load. The zero
	// value and fp16 keep them as stored. Embeddings, norms and the LM head
	// stay in 16 bits.
	Weights wq.Spec
	// Calib holds GPTQ's calibration statistics by checkpoint tensor name
	// (engine.Calibrate makes them); required when Weights.Method is GPTQ.
	Calib map[string]*wq.Hessian
	// DECKChunk > 0 adds dynamic error compensation to every quantized
	// linear layer, selecting DECKChunk channels per wq.ChunkChannels inputs.
	DECKChunk int
	// DECByShape, if not nil, sets DEC per linear-layer shape instead (the
	// tuned choices of the settings file: DECTuning.Choices); a shape it
	// lacks gets DECKChunk.
	DECByShape map[Shape]DECChoice
	// DECByLayer, if not nil, sets DEC per kind of linear layer instead
	// of DECKChunk and DECByShape (a kind it does not name: none); each
	// name must be one of the model's (DECAlloc.Check).
	DECByLayer DECAlloc
	// DECResidual is the element type of the DEC residual (0: wq.Int4).
	DECResidual wq.Elem
	// Log receives one line per load-time path decision (a backend without
	// a low-bit Linear); nil: quiet.
	Log io.Writer
	// Quantized, if not nil, caches the packed matrices by tensor name across
	// loads of the same checkpoint with the same Weights (and calibration):
	// a load finds them there instead of quantizing again (GPTQ takes
	// seconds per layer), e.g. to load one format with several DEC k_chunk.
	// Backends do not modify the matrices, so models may share them.
	Quantized map[string]*wq.Matrix
	// HeadDim, if not 0, pads each attention head to this many dimensions
	// (Config.PadHeads; at least the checkpoint's head dim). 0 pads to
	// what the backend asks for (backend.HeadDimPadder: the CUDA backend's
	// kernels take 64, 128 and 256), and keeps the checkpoint's head dim
	// on other backends (the CPU).
	HeadDim int
}

// padHeads returns cfg with its heads padded as LoadOptions.HeadDim (want)
// or the backend asks (Config.PadHeads), cfg itself where neither pads.
func padHeads(cfg *Config, be backend.Backend, want int) (*Config, error) {
	dp := want
	if dp == 0 {
		p, ok := be.(backend.HeadDimPadder)
		if !ok {
			return cfg, nil
		}
		if dp, ok = p.PadHeadDim(cfg.HeadDim); !ok {
			return cfg, nil // the backend's caches refuse it by name
		}
	}
	return cfg.PadHeads(dp)
}

// constructor builds a model of one family from its config and checkpoint.
type constructor func(cfg *Config, ld *loader) (Model, error)

// families maps config model_type to the constructor of its architecture
// file; each file registers itself in init.
var families = map[string]constructor{}

// register makes a constructor available to Load for the given model types.
func register(c constructor, modelTypes ...string) {
	for _, t := range modelTypes {
		families[t] = c
	}
}

// Load loads the Hugging Face model in dir (config.json and model.safetensors
// or a sharded model.safetensors.index.json) onto be.
func Load(dir string, be backend.Backend, opts LoadOptions) (Model, error) {
	cfg, err := LoadConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, err
	}
	ck, err := safetensors.OpenDir(dir)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	// The model owns the checkpoint: a backend that computes on the stored
	// bytes in place (viewLoader) reads the mapping until Close.
	m, err := loadCheckpoint(cfg, ck, be, opts, true)
	if err != nil {
		_ = ck.Close()
		return nil, err
	}
	return m, nil
}

// LoadCheckpoint loads a model of the given config from an open checkpoint
// onto be. The checkpoint may be closed once it returns: weights that a
// backend reads in place are copied from a memory-mapped checkpoint (bytes
// held in memory, as OpenBytes gives, are shared, not copied).
func LoadCheckpoint(cfg *Config, ck *safetensors.Checkpoint, be backend.Backend, opts LoadOptions) (Model, error) {
	return loadCheckpoint(cfg, ck, be, opts, false)
}

// viewLoader is implemented by backends that compute on a weight's stored
// bytes in place (backend/cpu): matrices keep the checkpoint's precision
// and memory, and the model keeps those bytes valid until Close. Others get
// LoadWeight, which copies (and int8 weights dequantized to float32).
type viewLoader interface {
	LoadWeightView(name string, dtype backend.DType, shape []int, data []byte) (backend.Weight, error)
	LoadInt8WeightView(name string, shape []int, q, scales []byte, group int) (backend.Weight, error)
}

// loadCheckpoint is LoadCheckpoint; with owned, the model takes ck and
// closes it in Close (Load's mapped files stay mapped for the weights).
func loadCheckpoint(cfg *Config, ck *safetensors.Checkpoint, be backend.Backend, opts LoadOptions, owned bool) (Model, error) {
	newModel, ok := families[cfg.ModelType]
	if !ok {
		return nil, fmt.Errorf("model: %w %q; supported: %s", ErrUnsupportedArchitecture, cfg.ModelType, supportedList())
	}
	if opts.DECKChunk < 0 {
		return nil, fmt.Errorf("model: negative DEC k_chunk %d", opts.DECKChunk)
	}
	if opts.DECKChunk > 0 && !opts.Weights.IsQuantized() {
		return nil, fmt.Errorf("model: DEC (k_chunk %d) needs quantized weights, not %q", opts.DECKChunk, opts.Weights.Short())
	}
	for sh, c := range opts.DECByShape {
		if c.KChunk < 0 || c.Blocks < 0 {
			return nil, fmt.Errorf("model: DEC for shape %v: k_chunk %d, n_tb %d: want non-negative values", sh, c.KChunk, c.Blocks)
		}
		if c.KChunk > 0 && !opts.Weights.IsQuantized() {
			return nil, fmt.Errorf("model: DEC (k_chunk %d for shape %v) needs quantized weights, not %q", c.KChunk, sh, opts.Weights.Short())
		}
	}
	if opts.DECByLayer != nil {
		if err := opts.DECByLayer.Check(cfg); err != nil {
			return nil, err
		}
		if opts.DECByLayer.On() && !opts.Weights.IsQuantized() {
			return nil, fmt.Errorf("model: DEC (%s) needs quantized weights, not %q", opts.DECByLayer, opts.Weights.Short())
		}
	}
	cfg, err := padHeads(cfg, be, opts.HeadDim)
	if err != nil {
		return nil, err
	}
	ld := &loader{ck: ck, be: be, progress: opts.Progress, opts: opts, quant: cfg.Quant}
	if vl, ok := be.(viewLoader); ok {
		ld.view = vl
		// Bytes of a mapped checkpoint that the caller closes must be
		// copied; owned or in-memory bytes are used in place.
		ld.copyView = !owned && ck.Mapped()
	}
	m, err := newModel(cfg, ld)
	if err != nil {
		return nil, err
	}
	if owned {
		k, ok := m.(checkpointKeeper)
		switch {
		case ld.view == nil:
			// The backend copied everything: the mapping can go now.
			_ = ck.Close()
		case ok:
			k.keepCheckpoint(ck)
		default:
			m.Close()
			return nil, fmt.Errorf("model: %s cannot keep its checkpoint open for the backend's in-place weights", cfg.ModelType)
		}
	}
	return m, nil
}

// checkpointKeeper is implemented by models that close the checkpoint their
// weights are read from in their Close.
type checkpointKeeper interface {
	keepCheckpoint(ck *safetensors.Checkpoint)
}

// StderrProgress returns, for LoadOptions.Progress, os.Stderr if it is a
// terminal (a character device: the bar redrawn in place), else
// LineProgress(os.Stderr) (a log or a pipe: a line a second on long loads).
func StderrProgress() io.Writer {
	st, err := os.Stderr.Stat()
	if err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return LineProgress(os.Stderr)
	}
	return os.Stderr
}

// LineProgress wraps w (a log file, a pipe) for LoadOptions.Progress: no
// bar redrawn with carriage returns, but, once a load has taken
// progressLineEvery, a line each progressLineEvery ("loading  45%  21/46
// MB, 2s") and a last one when it ends. A load faster than that prints
// nothing.
func LineProgress(w io.Writer) io.Writer { return lineProgress{w} }

// lineProgress marks a progress writer that takes whole lines.
type lineProgress struct{ io.Writer }

// progressLineEvery is how often LineProgress prints.
const progressLineEvery = time.Second

// loader fills a model's weight struct from a checkpoint.
//
// A weight field is a backend.Weight with struct tags:
//
//	hf:"model.layers.%d.self_attn.q_proj.weight"  the checkpoint tensor name;
//	                                               %d is the layer index
//	shape:"QD,H"                                   the expected shape, in the
//	                                               symbols of loader.dims
//	if:"qkv_bias"                                  load only if the condition
//	                                               holds ("!tied": if it does not)
//	quant:"linear"                                 a linear layer's weight, which
//	                                               LoadOptions.Weights quantizes
//	tp:"rows,heads"                                how it splits over tensor-
//	                                               parallel ranks (split); none:
//	                                               whole on every rank
//	norm:"rms"                                     an RMSNorm weight: loaded as
//	                                               1 + w in float32 where
//	                                               loader.normPlusOne (Gemma)
//	rope:"q"                                       rows of whole heads of D that
//	rope:"k"                                       RoPE rotates (q_proj, k_proj
//	rope:"dims"                                    and biases; "dims": the q and
//	                                               k norms' weights over one or
//	                                               all heads): laid out within
//	                                               each head where loader.heads
//	                                               (partial rotary embeddings,
//	                                               Config.RotaryDims; padded
//	                                               heads, Config.PadHeads),
//	                                               "q" also scaled by its factor
//
// Where the heads are padded (loader.stored), the symbols D, QD and KVD
// of a shape tag are the padded sizes, the backend's; the checkpoint's
// tensor has the stored ones, and its head axis (the axis of the first of
// those symbols) is padded at load: by the RoPE layout where a rope tag
// says so, else each head's D values followed by zeros (v_proj's rows,
// o_proj's columns).
//
// Where loader.fused maps a field's tensor name to rows of another stored
// tensor (Phi-3's qkv_proj holds q|k|v, gate_up_proj gate|up), the field
// gets those rows under its own name: a row-major tensor's rows are
// contiguous bytes, so this is a view, and a packed format, which
// quantizes each output row on its own, gets the same matrix as from a
// separate tensor.
//
// A slice of structs (the layers) is filled element by element with %d set
// to the index. Tensors of the checkpoint that no field reads are an error:
// they mean the config and the checkpoint disagree.
type loader struct {
	ck       *safetensors.Checkpoint
	be       backend.Backend
	progress io.Writer
	random   *randomSource   // random weights instead of ck (NewRandom)
	dims     map[string]int  // shape symbols
	conds    map[string]bool // if-tag conditions
	// layerConds are if-tag conditions that differ by layer (a layer's
	// dense MLP or mixture of experts), indexed by layer.
	layerConds map[string][]bool
	ignore     func(name string) bool
	// wrapper is Config.Wrapper: the checkpoint is a multimodal model's,
	// whose text model's tensors load reads under the wrapper's prefix
	// (textTensors sets rename); "" for a text checkpoint.
	wrapper string
	// rename, if set, maps a field's Hugging Face name to the name the
	// checkpoint stores it under.
	rename func(name string) string
	// fused, if set, says where a field's tensor lies inside another
	// stored tensor (ok false: stored under its own name).
	fused func(name string) (rs rowSlice, ok bool)
	// normPlusOne loads the norm:"rms" weights as 1 + w (GemmaRMSNorm).
	normPlusOne bool
	// heads, if set, lays out the rope-tagged weights for partial rotary
	// embeddings and pads every head-structured weight where the heads are
	// padded (nil: RoPE rotates whole heads of the checkpoint's size,
	// nothing to do).
	heads *headLayout
	// stored, if set, are the shape symbols of the checkpoint where they
	// differ from dims (padded heads: Config.PadHeads).
	stored map[string]int
	// scale, if set, gives the factor by which a tensor's values are
	// multiplied at load (1: none): the multipliers a family applies at
	// run time folded into the weights they follow (Granite's, attnFolds).
	// Scaled weights are stored as float32.
	scale func(name string) float64
	quant *QuantConfig // int8 weights with scales (nil: none)
	opts  LoadOptions
	// decNamed is the DEC choice of each linear weight by tensor name
	// (decByLayer) where LoadOptions.DECByShape is set (decByKind where
	// DECByLayer is), nil otherwise.
	decNamed map[string]DECChoice
	// tiedHead is a tied model's quantized head, made where the
	// embedding's lookup needed its values first (headValues), for the
	// head's own load (loadLinear).
	tiedHead *wq.Matrix
	view     viewLoader // the backend reads stored bytes in place (nil: LoadWeight copies)
	copyView bool       // view must get copies: the caller unmaps the checkpoint

	mem WeightMemory // filled by load
	// keptFormats names the formats of the matrices load kept as stored
	// ("bf16", "fp16", "fp32", "int8"), for WeightMemory.Format.
	keptFormats  map[string]bool
	fallbackSaid bool // the dequantize-to-float32 line was logged
}

// rowSlice is where a weight lies in a stored tensor that fuses several:
// rows [Lo, Hi) of Tensor, which has Rows rows.
type rowSlice struct {
	Tensor       string
	Lo, Hi, Rows int
	// Shape, if set, is Tensor's stored shape, whose row-major rows are
	// Rows of the weight's width (transformers 5's 3-D fused experts
	// [E, 2·IE, H]); nil: [Rows, the weight's other dimensions].
	Shape []int
}

// weightSpec is one tensor to load into a struct field.
type weightSpec struct {
	name   string
	shape  []int
	dst    *backend.Weight
	scale  string        // the scales of an I8 tensor (see quant.go), "" for float
	linear bool          // tagged quant:"linear"
	head   bool          // tagged quant:"head": the LM head (wq.Spec.Head)
	split  backend.Split // from the tp tag; given to a backend.SplitLoader
	norm   bool          // tagged norm:"rms"
	rope   string        // the rope tag: "q", "k", "dims" or ""
	// stored is the shape of the checkpoint's tensor (shape but for padded
	// heads), headAxis the axis of shape that holds whole heads (-1: none).
	stored   []int
	headAxis int
	// from is the stored tensor holding the weight and its rows (the
	// weight's own name and all its rows where nothing is fused).
	from rowSlice
}

// storedShape is the shape of the tensor the spec's weight is read from.
func (s *weightSpec) storedShape() []int {
	if s.from.Shape != nil {
		return s.from.Shape
	}
	return append([]int{s.from.Rows}, s.stored[1:]...)
}

// load fills the tagged backend.Weight fields of *dst.
func (ld *loader) load(dst any) error {
	var specs []weightSpec
	if err := ld.collect(reflect.ValueOf(dst).Elem(), nil, &specs); err != nil {
		return err
	}
	if ld.random != nil {
		return ld.random.load(ld.be, specs)
	}
	if ld.wrapper != "" {
		if err := ld.textTensors(); err != nil {
			return err
		}
	}
	if a := ld.opts.DECByLayer; a != nil {
		ld.decNamed = decByKind(specs, a)
	} else if by := ld.opts.DECByShape; by != nil {
		ld.decNamed = decByLayer(specs, func(N, K int) DECChoice {
			if c, ok := by[Shape{N, K}]; ok {
				return c
			}
			return DECChoice{KChunk: ld.opts.DECKChunk}
		})
	}
	used := make(map[string]bool, len(specs))
	var total int64
	for i := range specs {
		s := &specs[i]
		s.from = rowSlice{Tensor: s.name, Hi: s.stored[0], Rows: s.stored[0]}
		if ld.rename != nil {
			s.from.Tensor = ld.rename(s.name)
		}
		if ld.fused != nil {
			if rs, ok := ld.fused(s.name); ok {
				s.from = rs
			}
		}
		info, ok := ld.ck.Info(s.from.Tensor)
		if !ok {
			return fmt.Errorf("model: checkpoint has no tensor %q", s.from.Tensor)
		}
		if want := s.storedShape(); !slices.Equal(info.Shape, want) {
			return fmt.Errorf("model: tensor %q has shape %v, want %v from config.json", s.from.Tensor, info.Shape, want)
		}
		used[s.from.Tensor] = true
		total += (info.End - info.Begin) / int64(s.from.Rows) * int64(s.from.Hi-s.from.Lo)
		if info.DType == safetensors.I8 {
			if s.from.Tensor != s.name {
				return fmt.Errorf("model: tensor %q: int8 weights of fused tensors are not supported", s.from.Tensor)
			}
			name, err := ld.quantScaleInfo(info)
			if err != nil {
				return err
			}
			s.scale, used[name] = name, true
		}
	}
	var unused []string
	for _, name := range ld.ck.Names() {
		if !used[name] && (ld.ignore == nil || !ld.ignore(name)) {
			unused = append(unused, name)
		}
	}
	if len(unused) > 0 {
		more := ""
		if len(unused) > 5 {
			more = fmt.Sprintf(" and %d more", len(unused)-5)
			unused = unused[:5]
		}
		return fmt.Errorf("model: the checkpoint has tensors this config does not use: %s%s (config.json and the weights disagree?)", strings.Join(unused, ", "), more)
	}

	sl, splitting := ld.be.(backend.SplitLoader)
	bar := newProgressBar(ld.progress, total)
	for _, s := range specs {
		t, err := ld.ck.Tensor(s.from.Tensor)
		if err != nil {
			return fmt.Errorf("model: %w", err)
		}
		if s.from.Lo != 0 || s.from.Hi != s.from.Rows || s.from.Shape != nil {
			// Rows [Lo, Hi) of the fused tensor: a view of its bytes.
			row := len(t.Data) / s.from.Rows
			t.Data = t.Data[s.from.Lo*row : s.from.Hi*row]
			t.Name, t.Shape = s.name, s.stored
		}
		if s.norm && ld.normPlusOne {
			if t, err = plusOne(t); err != nil {
				return err
			}
		}
		quantized := s.linear && ld.opts.Weights.IsQuantized() || s.head && ld.quantHead()
		permute := ld.heads.lays(s)
		factor := 1.0
		if ld.scale != nil {
			factor = ld.scale(s.name)
		}
		tiedEmbed := ld.tiedEmbed(s)
		if s.scale != "" && ld.view != nil && !quantized && !permute && factor == 1 && !tiedEmbed {
			// int8 codes and scales, read in their stored precision.
			w, err := ld.loadInt8View(t, s)
			if err != nil {
				return err
			}
			n := int64(backend.NumElements(s.shape))
			ld.mem.FP16Bytes += 2 * n
			ld.mem.Bytes += n + 2*n/int64(ld.quant.GroupSize) // codes and fp16 scales
			ld.keptAs("int8")
			*s.dst = w
			bar.add(int64(len(t.Data)))
			continue
		}
		if s.scale != "" {
			// int8 rows are permuted (and padded) as float32 (the
			// scales' groups would have to move with them).
			if t, err = ld.dequant(t, s); err != nil {
				return err
			}
		}
		if factor != 1 {
			if t, err = scaled(t, factor); err != nil {
				return err
			}
		}
		if permute {
			if t, err = ld.heads.apply(t, s); err != nil {
				return err
			}
		}
		if tiedEmbed {
			if t, err = ld.headValues(t, s); err != nil {
				return err
			}
		}
		dt, err := backendDType(t.DType)
		if err != nil {
			return fmt.Errorf("model: %s: tensor %q: %w", t.File, s.name, err)
		}
		n := int64(backend.NumElements(s.shape))
		if !(s.head && ld.conds["tied"] && !ld.conds["qembed"]) { // a tied head's copy is no weight of the fp16 model, unless it is the embedding
			ld.mem.FP16Bytes += 2 * n
		}
		if !quantized && len(s.shape) == 2 {
			ld.keptAs(storedName(dt))
		}
		var w backend.Weight
		switch {
		case quantized:
			w, err = ld.loadLinear(s.name, s.shape, dt, t.Data, s.split, s.head)
		case splitting:
			ld.mem.Bytes += 2 * n
			w, err = sl.LoadWeightSplit(s.name, dt, s.shape, t.Data, s.split)
		case ld.view != nil && len(s.shape) == 2:
			ld.mem.Bytes += 2 * n
			data := t.Data
			if ld.copyView {
				data = bytes.Clone(data)
			}
			w, err = ld.view.LoadWeightView(s.name, dt, s.shape, data)
		default:
			ld.mem.Bytes += 2 * n
			w, err = ld.be.LoadWeight(s.name, dt, s.shape, t.Data)
		}
		if err != nil {
			return fmt.Errorf("model: %s: %w", t.File, err)
		}
		*s.dst = w
		bar.add(int64(len(t.Data)))
	}
	bar.done()
	return nil
}

// quantHead reports whether the LM head is quantized (wq.Spec.Head): asked
// for, and not split by vocabulary over tensor-parallel ranks, which a
// packed weight cannot be (the head then stays 16-bit; Load logs it).
func (ld *loader) quantHead() bool {
	_, splitting := ld.be.(backend.SplitLoader)
	w := ld.opts.Weights
	if ld.random != nil {
		w = ld.random.weights
	}
	return w.HeadQuantized() && !splitting
}

// tiedEmbedName is the token embedding's tensor, which a tied model's head
// reads too (Llama.TokenEmbedding, Llama.TiedHead).
const tiedEmbedName = "model.embed_tokens.weight"

// tiedEmbed reports whether s is the token embedding of a tied model whose
// head is quantized on a backend that keeps a separate embedding (not a
// backend.QuantEmbedder): its lookup then reads the quantized head's values
// ŵ (headValues), as a QuantEmbedder's gathers them, so every backend runs
// the same model.
func (ld *loader) tiedEmbed(s weightSpec) bool {
	return !s.head && s.name == tiedEmbedName && ld.conds["tied_qhead"]
}

// headValues quantizes the tied embedding t of spec s as the LM head
// (wq.Spec.HeadSpec; kept in ld.tiedHead for the head's own load) and
// returns its dequantized values ŵ as an F32 tensor.
func (ld *loader) headValues(t safetensors.Tensor, s weightSpec) (safetensors.Tensor, error) {
	dt, err := backendDType(t.DType)
	if err != nil {
		return t, fmt.Errorf("model: %s: tensor %q: %w", t.File, s.name, err)
	}
	w, err := decodeFloat32(dt, t.Data)
	if err != nil {
		return t, fmt.Errorf("model: tensor %q: %w", s.name, err)
	}
	h := ld.opts.Weights.HeadSpec()
	m, err := wq.Quantize(h.Elem, h.Group, s.shape[0], s.shape[1], w)
	if err != nil {
		return t, fmt.Errorf("model: tensor %q: %w", s.name, err)
	}
	ld.tiedHead = m
	t.DType, t.Data = safetensors.F32, m.DequantBytes()
	return t, nil
}

// embedsQuant reports whether the backend's Embedding gathers packed rows
// (backend.QuantEmbedder) and the weights are made by LoadQuantWeight there
// (a real checkpoint: random weights come from another loader).
func (ld *loader) embedsQuant() bool {
	_, ok := ld.be.(backend.QuantEmbedder)
	return ok && ld.random == nil
}

// dequant turns the I8 tensor t of spec s and its scales into an F32 tensor.
func (ld *loader) dequant(t safetensors.Tensor, s weightSpec) (safetensors.Tensor, error) {
	sc, err := ld.ck.Tensor(s.scale)
	if err != nil {
		return t, fmt.Errorf("model: %w", err)
	}
	data, err := dequantInt8(t.Data, sc.Data, s.stored[0], s.stored[1], ld.quant.GroupSize)
	if err != nil {
		return t, fmt.Errorf("model: %s: tensor %q: %w", t.File, s.name, err)
	}
	t.DType, t.Data = safetensors.F32, data
	return t, nil
}

// loadInt8View hands the I8 tensor t of spec s and its scales to the
// backend in their stored form.
func (ld *loader) loadInt8View(t safetensors.Tensor, s weightSpec) (backend.Weight, error) {
	sc, err := ld.ck.Tensor(s.scale)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	q := t.Data
	if ld.copyView {
		q = bytes.Clone(q)
	}
	w, err := ld.view.LoadInt8WeightView(s.name, s.shape, q, sc.Data, ld.quant.GroupSize)
	if err != nil {
		return nil, fmt.Errorf("model: %s: %w", t.File, err)
	}
	return w, nil
}

// weightType is the reflect type of backend.Weight.
var weightType = reflect.TypeFor[backend.Weight]()

// collect walks the struct v, appending a spec per tagged weight field.
// idx holds the indexes of the slices of structs v lies in: the layer (the
// tags' %d), then the expert (%e) of a layer's Experts.
func (ld *loader) collect(v reflect.Value, idx []int, specs *[]weightSpec) error {
	t := v.Type()
	for i := range t.NumField() {
		f, fv := t.Field(i), v.Field(i)
		switch {
		case f.Type == weightType:
			tag, ok := f.Tag.Lookup("hf")
			if !ok {
				continue
			}
			if cond, ok := f.Tag.Lookup("if"); ok {
				want := !strings.HasPrefix(cond, "!")
				c, known := ld.conds[strings.TrimPrefix(cond, "!")]
				if perLayer, ok := ld.layerConds[strings.TrimPrefix(cond, "!")]; ok && len(idx) > 0 && idx[0] < len(perLayer) {
					c, known = perLayer[idx[0]], true
				}
				if !known {
					return fmt.Errorf("model: field %s: unknown condition %q", f.Name, cond)
				}
				if c != want {
					continue
				}
			}
			name := tag
			for i, verb := range []string{"%d", "%e"} {
				if !strings.Contains(tag, verb) {
					continue
				}
				if i >= len(idx) {
					return fmt.Errorf("model: field %s: tag %q outside a layer or expert", f.Name, tag)
				}
				name = strings.ReplaceAll(name, verb, strconv.Itoa(idx[i]))
			}
			shape, err := ld.shape(ld.dims, f.Tag.Get("shape"))
			if err != nil {
				return fmt.Errorf("model: field %s: %w", f.Name, err)
			}
			stored, axis := shape, headAxis(f.Tag.Get("shape"))
			if ld.stored != nil {
				if stored, err = ld.shape(ld.stored, f.Tag.Get("shape")); err != nil {
					return fmt.Errorf("model: field %s: %w", f.Name, err)
				}
			}
			split, err := ld.split(f.Tag.Get("tp"))
			if err != nil {
				return fmt.Errorf("model: field %s: %w", f.Name, err)
			}
			*specs = append(*specs, weightSpec{name: name, shape: shape, dst: fv.Addr().Interface().(*backend.Weight),
				linear: f.Tag.Get("quant") == "linear", head: f.Tag.Get("quant") == "head", split: split, norm: f.Tag.Get("norm") == "rms", rope: f.Tag.Get("rope"),
				stored: stored, headAxis: axis})
		case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct && f.IsExported():
			for j := range fv.Len() {
				if err := ld.collect(fv.Index(j), append(slices.Clip(idx), j), specs); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// headSymbols are the shape symbols of whole heads (of D values each).
var headSymbols = []string{"D", "QD", "KVD"}

// headAxis returns the axis of a shape tag that holds whole heads: that of
// its first head symbol, -1 where it has none.
func headAxis(tag string) int {
	for i, sym := range strings.Split(tag, ",") {
		if slices.Contains(headSymbols, sym) {
			return i
		}
	}
	return -1
}

// shape evaluates a shape tag such as "QD,H" in the symbols dims.
func (ld *loader) shape(dims map[string]int, tag string) ([]int, error) {
	if tag == "" {
		return nil, errors.New("missing shape tag")
	}
	var shape []int
	for _, sym := range strings.Split(tag, ",") {
		d, ok := dims[sym]
		if !ok {
			return nil, fmt.Errorf("unknown dimension %q in shape tag %q", sym, tag)
		}
		shape = append(shape, d)
	}
	return shape, nil
}

// split evaluates a tp tag: "rows", "cols" or "vocab", with ",heads" (by
// whole query heads of D = dims["D"] rows or columns) or ",kvheads" (by
// whole KV heads, replicated where there are fewer than ranks); "" is a
// weight kept whole on every rank.
func (ld *loader) split(tag string) (backend.Split, error) {
	if tag == "" {
		return backend.Split{Kind: backend.Replicated}, nil
	}
	kind, unit, _ := strings.Cut(tag, ",")
	var s backend.Split
	switch kind {
	case "rows":
		s.Kind = backend.Rows
	case "cols":
		s.Kind = backend.Cols
	case "vocab":
		s.Kind = backend.Vocab
	default:
		return s, fmt.Errorf("unknown split %q in tp tag %q (want rows, cols or vocab)", kind, tag)
	}
	switch unit {
	case "":
	case "heads", "kvheads":
		if s.Kind == backend.Vocab {
			return s, fmt.Errorf("tp tag %q: a vocabulary splits by rows", tag)
		}
		s.Unit, s.What = ld.dims["D"], "query heads"
		if unit == "kvheads" {
			s.Replicate, s.What = true, "KV heads"
		}
		if s.Unit <= 0 {
			return s, fmt.Errorf("tp tag %q: no head dimension D", tag)
		}
	default:
		return s, fmt.Errorf("unknown unit %q in tp tag %q (want heads or kvheads)", unit, tag)
	}
	return s, nil
}

// plusOne returns the norm weight t as float32 values 1 + w, each sum
// rounded to float32 as GemmaRMSNorm's 1.0 + weight.float() is: the one
// place Gemma's (1 + w) scaling is applied (the backends' RMSNorm
// multiplies by the weight as stored).
func plusOne(t safetensors.Tensor) (safetensors.Tensor, error) {
	return mapFloat32(t, func(v float32) float32 { return 1 + v })
}

// scaled returns the tensor t times f as float32 values, each product
// float32(float64(w)·f).
func scaled(t safetensors.Tensor, f float64) (safetensors.Tensor, error) {
	return mapFloat32(t, func(v float32) float32 { return float32(float64(v) * f) })
}

// mapFloat32 returns t's values through fn as a float32 tensor, in a new
// buffer: t's bytes may be a read-only mapping of the checkpoint, or the
// bytes a backend keeps in place.
func mapFloat32(t safetensors.Tensor, fn func(float32) float32) (safetensors.Tensor, error) {
	w, err := t.Float32()
	if err != nil {
		return t, fmt.Errorf("model: %s: %w", t.File, err)
	}
	data := make([]byte, 4*len(w))
	for i, v := range w {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(fn(v)))
	}
	t.DType, t.Data = safetensors.F32, data
	return t, nil
}

// headLayout is the load-time layout of each head's values: partial rotary
// embeddings (Config.RotaryDims) and heads padded for the backend
// (Config.PadHeads). Each head's D rows of q and k (and their biases and
// norms) become Dp rows so that transformers' rotated pairs (i, i + R/2),
// i < R/2, become the backends' pairs (i, i + Dp/2), its D − R
// pass-through dimensions fill the next pairs, and the Dp − D padded ones
// the last, zero; InvFreq gives every pair past R/2 inverse frequency 0.
// The other weights with whole heads (v's rows, o's columns) keep each
// head's D values in order, followed by Dp − D zeros.
type headLayout struct {
	D, Dp, R int
	// src[j] is the row of a head in the checkpoint that goes to row j of
	// the laid-out head, -1 for a zero row (padding).
	src []int
	// qScale multiplies q's rotated rows (those of the pairs i < R/2):
	// longrope's attention factor squared, which transformers applies to
	// cos and sin of the rotated dimensions only (1: none). Since rotation
	// is linear, f² on q's rotated rows before RoPE gives the scores of f
	// on both q and k after it, and the pass-through dimensions keep
	// theirs; the model then scales nothing at run time.
	qScale float64
}

// newHeadLayout returns the layout of heads of D stored dimensions, R of
// them rotated (R <= D, both even), laid out in Dp >= D (even), with
// longrope's attention factor f (1 for none). interleaved: the rotated
// pairs are (2i, 2i+1) of the first R dimensions (GLM-4's), not (i, i +
// R/2).
func newHeadLayout(D, Dp, R int, f float64, interleaved bool) *headLayout {
	src := make([]int, Dp)
	for j := range src {
		src[j] = -1
	}
	h, p := R/2, (D-R)/2 // rotated pairs, pass-through pairs
	for j := range h {
		src[j] = j          // HF's first halves of the rotated pairs
		src[Dp/2+j] = h + j // and their partners
		if interleaved {
			src[j], src[Dp/2+j] = 2*j, 2*j+1
		}
	}
	for j := range p {
		src[h+j] = R + j // the pass-through dimensions, two by two
		src[Dp/2+h+j] = R + p + j
	}
	return &headLayout{D: D, Dp: Dp, R: R, src: src, qScale: f * f}
}

// lays reports whether the weight of spec s is laid out at load (r may be
// nil: nothing is).
func (r *headLayout) lays(s weightSpec) bool {
	return r != nil && (s.rope != "" || r.Dp != r.D && s.headAxis >= 0)
}

// apply returns the tensor t of spec s (its stored shape; lays(s)) in the
// layout, of shape s.shape, in a new buffer (t's bytes may be a read-only
// mapping of the checkpoint, or the bytes a backend keeps in place). The
// rows of q are scaled by qScale where it is not 1, and then stored as
// float32 (so that the scaled values are not rounded to the checkpoint's
// dtype).
func (r *headLayout) apply(t safetensors.Tensor, s weightSpec) (safetensors.Tensor, error) {
	axis := s.headAxis
	if s.rope != "" {
		axis = 0
	}
	if axis < 0 || axis >= len(s.stored) || s.stored[axis]%r.D != 0 || s.stored[axis]/r.D*r.Dp != s.shape[axis] {
		return t, fmt.Errorf("model: tensor %q: shape %v is not whole heads of %d (to lay out as %v)", s.name, s.stored, r.D, s.shape)
	}
	n := backend.NumElements(s.stored)
	scale := s.rope == "q" && r.qScale != 1
	if scale {
		var err error
		if t, err = mapFloat32(t, func(v float32) float32 { return v }); err != nil {
			return t, err
		}
	}
	if n <= 0 || len(t.Data)%n != 0 {
		return t, fmt.Errorf("model: tensor %q: %d bytes for shape %v", s.name, len(t.Data), s.stored)
	}
	// The head axis splits each tensor into outer × (heads·D) × inner
	// elements; a row of the layout is inner elements.
	outer := 1
	for _, d := range s.stored[:axis] {
		outer *= d
	}
	row := len(t.Data) / n
	for _, d := range s.stored[axis+1:] {
		row *= d
	}
	src := r.src
	if s.rope == "" {
		src = make([]int, r.Dp) // in order, then zeros
		for j := range src {
			src[j] = j
			if j >= r.D {
				src[j] = -1
			}
		}
	}
	heads := s.stored[axis] / r.D
	in, outRows := heads*r.D, heads*r.Dp
	out := make([]byte, outer*outRows*row)
	for o := range outer {
		from, to := t.Data[o*in*row:(o+1)*in*row], out[o*outRows*row:(o+1)*outRows*row]
		for h := range heads {
			for j, k := range src {
				if k < 0 {
					continue // zero
				}
				d := (h*r.Dp + j) * row
				copy(to[d:d+row], from[(h*r.D+k)*row:(h*r.D+k+1)*row])
				if scale && k < r.R {
					b := to[d : d+row]
					for i := 0; i < len(b); i += 4 {
						x := math.Float32frombits(binary.LittleEndian.Uint32(b[i:]))
						binary.LittleEndian.PutUint32(b[i:], math.Float32bits(float32(float64(x)*r.qScale)))
					}
				}
			}
		}
	}
	t.Data, t.Shape = out, s.shape
	return t, nil
}

// backendDType maps a checkpoint dtype to the backend's.
func backendDType(d safetensors.DType) (backend.DType, error) {
	switch d {
	case safetensors.F32:
		return backend.F32, nil
	case safetensors.F16:
		return backend.F16, nil
	case safetensors.BF16:
		return backend.BF16, nil
	}
	return 0, fmt.Errorf("%w %q for a weight (supported: F32, F16, BF16)", safetensors.ErrUnsupportedDType, d)
}

// loadVector makes a weight from host float32 values (e.g. RoPE frequencies).
func loadVector(be backend.Backend, name string, v []float32) (backend.Weight, error) {
	data := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(x))
	}
	return be.LoadWeight(name, backend.F32, []int{len(v)}, data)
}

// progressBar draws "loading [=====     ]  45%  21/46 MB" on one line, or
// prints a line a second to a LineProgress writer.
type progressBar struct {
	w             io.Writer
	lines         bool // w is a LineProgress: whole lines, one a second
	total, loaded int64
	shown         int // last percentage drawn, -1 before the first
	start, last   time.Time
}

// progressWidth is the number of cells of the bar.
const progressWidth = 30

func newProgressBar(w io.Writer, total int64) *progressBar {
	p := &progressBar{w: w, total: max(total, 1), shown: -1, start: time.Now()}
	if lw, ok := w.(lineProgress); ok {
		p.w, p.lines, p.last = lw.Writer, true, p.start
	}
	p.add(0)
	return p
}

// add advances the bar by n bytes, redrawing when the percentage changes.
func (p *progressBar) add(n int64) {
	if p.w == nil {
		return
	}
	p.loaded += n
	pct := int(p.loaded * 100 / p.total)
	if p.lines {
		if now := time.Now(); now.Sub(p.last) >= progressLineEvery {
			p.last, p.shown = now, pct
			fmt.Fprintf(p.w, "loading %3d%%  %d/%d MB, %.0fs\n", pct, p.loaded>>20, p.total>>20, now.Sub(p.start).Seconds())
		}
		return
	}
	if pct == p.shown {
		return
	}
	p.shown = pct
	cells := pct * progressWidth / 100
	fmt.Fprintf(p.w, "\rloading [%s%s] %3d%%  %d/%d MB", strings.Repeat("=", cells), strings.Repeat(" ", progressWidth-cells), pct, p.loaded>>20, p.total>>20)
}

// done ends the bar's line.
func (p *progressBar) done() {
	switch {
	case p.w == nil:
	case p.lines && p.shown >= 0: // lines were printed: say it ended
		fmt.Fprintf(p.w, "loaded %d MB in %.1fs\n", p.loaded>>20, time.Since(p.start).Seconds())
	case !p.lines:
		fmt.Fprintf(p.w, " in %.1fs\n", time.Since(p.start).Seconds())
	}
}

// freeWeights frees every backend.Weight field of the struct v (recursing
// into slices of structs) and sets it to nil. A weight shared by two fields
// (tied embeddings) is freed once.
func freeWeights(be backend.Backend, v reflect.Value) {
	seen := map[backend.Weight]bool{}
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		t := v.Type()
		for i := range t.NumField() {
			f, fv := t.Field(i), v.Field(i)
			switch {
			case !f.IsExported():
			case f.Type == weightType:
				if w, _ := fv.Interface().(backend.Weight); w != nil && !seen[w] {
					seen[w] = true
					be.FreeWeight(w)
				}
				fv.Set(reflect.Zero(weightType))
			case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
				for j := range fv.Len() {
					walk(fv.Index(j))
				}
			}
		}
	}
	walk(v)
}

// Where the text model of a multimodal checkpoint lies (Config.Wrapper):
// transformers 4.5x saved Gemma3ForConditionalGeneration and
// Mistral3ForConditionalGeneration with the text model under
// "language_model.model." and its head as "language_model.lm_head.weight"
// (and 5.17 still does); transformers 5's module names are
// "model.language_model." and "lm_head.weight" (Qwen3-VL's checkpoints).
// All put the vision tower and the projector beside it. The first layout
// whose token embedding the checkpoint holds is the one read.
var textLayouts = []struct{ model, head string }{
	{"language_model.model.", "language_model.lm_head.weight"},
	{"model.language_model.", "lm_head.weight"},
	// Qwen2.5-VL as 4.5x saved it: the text model's own names, the
	// vision tower beside them as "visual.".
	{"model.", "lm_head.weight"},
}

// storesTextHead reports whether a multimodal checkpoint stores its text
// model's LM head (either layout of textLayouts).
func (ld *loader) storesTextHead() bool {
	for _, l := range textLayouts {
		if _, ok := ld.ck.Info(l.head); ok {
			if _, ok := ld.ck.Info(l.model + "embed_tokens.weight"); ok {
				return true
			}
		}
	}
	return false
}

// textTensors sets rename to the layout of textLayouts the checkpoint
// uses (found by its token embedding), and ignore to pass over every
// tensor outside the text model: the vision tower and projector.
func (ld *loader) textTensors() error {
	for _, l := range textLayouts {
		if _, ok := ld.ck.Info(l.model + "embed_tokens.weight"); !ok {
			continue
		}
		ld.rename = func(name string) string {
			if rest, ok := strings.CutPrefix(name, "model."); ok {
				return l.model + rest
			}
			if name == "lm_head.weight" {
				return l.head
			}
			return name
		}
		inner := ld.ignore
		ld.ignore = func(name string) bool {
			var hf string
			switch rest, ok := strings.CutPrefix(name, l.model); {
			case ok:
				hf = "model." + rest
			case name == l.head:
				hf = "lm_head.weight"
			default:
				return true // the vision tower's, the projector's
			}
			return inner != nil && inner(hf)
		}
		return nil
	}
	var names []string
	for _, l := range textLayouts {
		names = append(names, strconv.Quote(l.model+"embed_tokens.weight"))
	}
	return fmt.Errorf("model: %s checkpoint without its text model's token embedding (looked for %s)", ld.wrapper, strings.Join(names, ", "))
}

// keptAs records that a matrix was loaded in the stored format name.
func (ld *loader) keptAs(name string) {
	if ld.keptFormats == nil {
		ld.keptFormats = map[string]bool{}
	}
	ld.keptFormats[name] = true
}

// storedFormat names the formats the matrices were kept in ("bf16", or
// "bf16+int8" for an int8 checkpoint's bf16 embeddings), "fp16" if none.
func (ld *loader) storedFormat() string {
	if len(ld.keptFormats) == 0 {
		return "fp16"
	}
	return strings.Join(slices.Sorted(maps.Keys(ld.keptFormats)), "+")
}

// storedName is the WeightMemory name of a checkpoint dtype.
func storedName(dt backend.DType) string {
	switch dt {
	case backend.BF16:
		return "bf16"
	case backend.F32:
		return "fp32"
	}
	return "fp16"
}
