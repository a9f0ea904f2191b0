package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/bitdecode/bitdecode/backend"
	_ "github.com/bitdecode/bitdecode/backend/cpu" // the "cpu" device, always linked
	"github.com/bitdecode/bitdecode/backend/tp"
	"github.com/bitdecode/bitdecode/eval"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/kvcache"
	"github.com/bitdecode/bitdecode/model"
	"github.com/bitdecode/bitdecode/model/gotiny"
	"github.com/bitdecode/bitdecode/tokenizer"
	"github.com/bitdecode/bitdecode/wq"
)

// Options say how Open opens a model: where it runs, how its linear layers
// are stored, and optionally the KV cache to build. The zero value opens
// the checkpoint on the best device linked in (a GPU if one is usable, else
// the CPU) with its own 16-bit weights and no cache.
type Options struct {
	// Device is "auto" (or ""), "cpu" or "cuda" (backend.ResolveDevice).
	Device string
	// TP is the tensor-parallel degree: with TP > 1 the model runs on a
	// group of TP ranks of Device (one per GPU for cuda, GPUs 0..TP-1;
	// CPU ranks that share the host's memory, to check the sharding, for
	// cpu), each holding a shard of every weight and the KV heads of its
	// query heads (backend.OpenGroup, backend/tp). 0 and 1: one device.
	TP int
	// Backend, if not nil, is used instead of opening one (Device and TP
	// are then ignored; TP > 1 with a Backend is an error); the caller
	// keeps it and Close leaves it open. Programs that hold several
	// variants of one checkpoint at once (eval ppl) share one.
	Backend backend.Backend
	// Threads is the CPU backend's goroutines per op (0: GOMAXPROCS).
	Threads int
	// Env looks up tuning settings by environment-variable name for the
	// backend (the program's edge passes os.LookupEnv; nil: none).
	Env func(name string) (string, bool)
	// BatchInvariant asks the backend for per-row results that do not
	// depend on the batch (backend.OpenOptions.BatchInvariant: on the GPU,
	// the batch-invariant linear kernel for every fp16 layer; packed
	// low-bit weights are then refused on the GPU). Serving sets it with
	// the cache's kvcache.Options.BatchInvariant, so that a request's
	// greedy text is the same alone and under load.
	BatchInvariant bool

	// Weights is the format of the linear layers (wq: int8, int4, int3,
	// with :gptq); the zero value keeps the checkpoint's 16-bit weights.
	Weights wq.Spec
	// DEC adds dynamic error compensation to quantized weights.
	DEC DEC
	// Calib is GPTQ's calibration text (required for a :gptq format).
	Calib Calib
	// Hessians, if not nil, are GPTQ statistics an earlier open collected
	// (Model.Hessians): Open uses them instead of calibrating again.
	Hessians map[string]*wq.Hessian
	// Quantized, if not nil, caches quantized matrices across opens of the
	// same checkpoint and weight format (model.LoadOptions.Quantized).
	Quantized map[string]*wq.Matrix

	// KV and Cache, when Cache is not nil, make Open build Model.Cache: a
	// cache of format KV (with the model's settings applied, NewCache) sized
	// by *Cache.
	KV    kv.Spec
	Cache *kvcache.Options

	// Progress receives a progress bar while weights load (nil: none).
	Progress io.Writer
	// Log receives one line per decision Open makes for the user: the
	// device fallback, the embedded model, where settings came from, DEC
	// picks, calibration (nil: quiet).
	Log io.Writer
}

// DEC selects dynamic error compensation (DecDEC) for quantized weights:
// KChunk channels per wq.ChunkChannels inputs for every linear layer, or,
// with TunedPct > 0, the k_chunk and thread blocks per layer shape that
// 'bitdecode tune dec' saved in the model's settings for a decode slowdown
// of TunedPct percent, or, with ByLayer set, k_chunk per kind of linear
// layer (model.DECAlloc: "down_proj:32+v_proj:256"). The zero value is off.
type DEC struct {
	KChunk   int
	TunedPct float64
	ByLayer  model.DECAlloc
}

// On reports whether d asks for DEC.
func (d DEC) On() bool { return d.KChunk > 0 || d.TunedPct > 0 || d.ByLayer.On() }

// Calib is GPTQ's calibration data: the first MaxTokens tokens (0: 16384)
// of the text in File.
type Calib struct {
	File      string
	MaxTokens int
}

// defaultCalibTokens is Calib.MaxTokens's default.
const defaultCalibTokens = 16384

// Model is a model opened for a command: the backend it runs on, its
// weights, tokenizer and settings, and optionally its KV cache.
type Model struct {
	// Name is the checkpoint directory, or the embedded model's name.
	Name string
	// Dir is the checkpoint directory ("" for the embedded model).
	Dir string
	// Device is the device the model runs on ("cpu", "cuda").
	Device string
	// TP is the number of ranks the model runs on (1 without tensor
	// parallelism).
	TP        int
	Backend   backend.Backend
	Model     model.Model
	Tokenizer *tokenizer.Tokenizer
	// Settings are the model's inference settings (model.LoadSettings).
	Settings model.Settings
	// Cache is the cache Options.Cache asked for (nil otherwise); Close
	// closes it.
	Cache kvcache.Cache
	// Hessians are the GPTQ statistics the weights were quantized with
	// (nil unless the format is GPTQ).
	Hessians map[string]*wq.Hessian

	log         io.Writer
	ownsBackend bool
	bwNoted     bool // the bw settings line was written
}

// Open opens the model in dir, or the embedded default model (model/gotiny)
// when dir is "", as o says: it resolves the device (falling back to the
// CPU with one line on o.Log) or, with o.TP > 1, opens a tensor-parallel
// group on it (the backend and the cache then shard the weights and the KV
// heads; nothing else changes here), reads the tokenizer, the settings and
// DEC tuning once, calibrates GPTQ formats, loads the weights and, with
// o.Cache, builds the KV cache.
func Open(dir string, o Options) (m *Model, err error) {
	m = &Model{Dir: dir, Name: dir, log: o.Log}
	defer func() {
		if err != nil {
			m.Close()
		}
	}()
	m.TP = 1
	bo := backend.OpenOptions{Threads: o.Threads, Env: o.Env, BatchInvariant: o.BatchInvariant}
	switch {
	case o.TP < 0:
		return m, fmt.Errorf("engine: tensor-parallel degree %d: want at least 1", o.TP)
	case o.TP > 1 && o.DEC.On():
		return m, fmt.Errorf("engine: DEC with --tp %d: not supported (a layer's compensation rows are chosen over all its inputs, which the ranks split); drop --dec-k or run --tp 1", o.TP)
	case o.Backend != nil && o.TP > 1:
		return m, fmt.Errorf("engine: TP %d with a given backend: open the group once (TP in the first Open) and share its backend", o.TP)
	case o.Backend != nil:
		m.Backend, m.Device = o.Backend, o.Backend.Name()
		if tb, ok := o.Backend.(*tp.Backend); ok {
			m.TP = len(tb.Ranks())
		}
	case o.TP > 1:
		// The group opens before anything is read, so that a device without
		// groups or with too few GPUs fails at once.
		if m.Backend, m.Device, err = openGroup(o.Device, o.TP, bo, o.Log); err != nil {
			return m, err
		}
		m.ownsBackend, m.TP = true, o.TP
		m.logf("tensor parallelism: %d ranks on %s (%s)", o.TP, m.Device, m.Backend.Name())
	default:
		if m.Backend, m.Device, err = backend.OpenDevice(o.Device, bo, o.Log); err != nil {
			return m, err
		}
		m.ownsBackend = true
	}
	if m.ownsBackend {
		if o.BatchInvariant && m.Device == "cuda" && o.Weights.IsQuantized() {
			return m, fmt.Errorf("engine: %s weights on the GPU are not batch-invariant (gemvq.cu and the dequantize+cuBLASLt path round differently by batch size): serve them with --batch-invariant=false, or serve fp16 weights", o.Weights)
		}
	}
	lo := model.LoadOptions{Progress: o.Progress, Weights: o.Weights, Log: o.Log, Quantized: o.Quantized}
	if dir == "" {
		if o.Weights.Method == wq.GPTQ || o.DEC.TunedPct > 0 {
			return m, errors.New("engine: GPTQ and tuned DEC read a checkpoint directory; the embedded model has none")
		}
		m.Name = gotiny.Name
		m.Settings = model.Settings{BW: model.BWSettings{Adj8: -1, Adj4: -1}, From: "defaults"}
		m.logf("no --model given: using the embedded model %s; --model DIR runs a Hugging Face checkpoint", gotiny.Describe())
		if m.Tokenizer, err = gotiny.Tokenizer(); err != nil {
			return m, err
		}
		lo.Progress = nil // 2 MB: no bar
		lo.DECKChunk, lo.DECByLayer = o.DEC.KChunk, o.DEC.ByLayer
		m.Model, err = gotiny.Load(m.Backend, lo)
		return m, m.finish(o, err)
	}
	if err = checkCheckpointDir(dir); err != nil {
		return m, err
	}
	if m.Tokenizer, err = tokenizer.Load(dir); err != nil {
		return m, err
	}
	if m.Settings, err = model.LoadSettings(dir); err != nil {
		return m, err
	}
	if err = m.applyDEC(&lo, o.DEC, o.Weights); err != nil {
		return m, err
	}
	if o.Weights.Method == wq.GPTQ {
		if lo.Calib = o.Hessians; lo.Calib == nil {
			if lo.Calib, err = m.calibrate(o.Calib); err != nil {
				return m, err
			}
		}
		m.Hessians = lo.Calib
	}
	m.Model, err = model.Load(dir, m.Backend, lo)
	switch {
	case errors.Is(err, backend.ErrSplit):
		err = fmt.Errorf("%w (--tp %d: try a degree that divides the model's heads and MLP)", err, m.TP)
	case err != nil:
		err = fmt.Errorf("%w (is %s a Hugging Face checkpoint directory?)", err, dir)
	}
	return m, m.finish(o, err)
}

// openGroup opens a tensor-parallel group of n ranks of the device choice
// and the backend that runs one model over it (tp.New), which then owns the
// ranks and their communicator.
func openGroup(choice string, n int, bo backend.OpenOptions, log io.Writer) (backend.Backend, string, error) {
	ranks, comm, name, err := backend.OpenGroup(choice, n, bo, log)
	if err != nil {
		if errors.Is(err, backend.ErrNoGroup) {
			err = fmt.Errorf("engine: --tp %d: %w; run with --tp 1, or on a device with several GPUs (--device cuda)", n, err)
		}
		return nil, "", err
	}
	tb, err := tp.New(ranks, comm)
	if err != nil {
		errs := []error{fmt.Errorf("engine: --tp %d on %s: %w", n, name, err), comm.Close()}
		for _, r := range ranks {
			errs = append(errs, r.Close())
		}
		return nil, "", errors.Join(errs...)
	}
	return tb, name, nil
}

// checkCheckpointDir says what dir is when it is not a Hugging Face
// checkpoint directory: a missing path (a hub id, when it looks like one:
// nothing is downloaded), a file (a .gguf, a config.json) or a directory
// without config.json.
func checkCheckpointDir(dir string) error {
	const want = "a local Hugging Face checkpoint directory (config.json, *.safetensors, tokenizer.json)"
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if parts := strings.Split(dir, "/"); len(parts) == 2 && parts[0] != "" && parts[1] != "" && !strings.HasPrefix(dir, ".") {
			return fmt.Errorf("engine: %s does not exist here; it looks like a Hugging Face hub id, and bitdecode downloads nothing: fetch it first (huggingface-cli download %s --local-dir DIR) and give --model DIR", dir, dir)
		}
		return fmt.Errorf("engine: model directory %s does not exist (want %s)", dir, want)
	case err != nil:
		return fmt.Errorf("engine: model directory: %w", err)
	case !st.IsDir():
		switch {
		case strings.HasSuffix(strings.ToLower(dir), ".gguf"):
			return fmt.Errorf("engine: %s is a GGUF file, which bitdecode does not read; give %s", dir, want)
		case filepath.Base(dir) == "config.json" || strings.HasSuffix(dir, ".safetensors") || filepath.Base(dir) == tokenizer.TokenizerFile:
			return fmt.Errorf("engine: %s is a file of a checkpoint; give the directory that holds it: --model %s", dir, filepath.Dir(dir))
		}
		return fmt.Errorf("engine: %s is a file; want %s", dir, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		return fmt.Errorf("engine: %s has no config.json: not %s", dir, want)
	}
	return nil
}

// finish builds the cache o asks for once the weights loaded without err.
func (m *Model) finish(o Options, err error) error {
	if err != nil || o.Cache == nil {
		return err
	}
	m.Cache, err = m.NewCache(o.KV, *o.Cache)
	return err
}

// Config returns the model's hyperparameters.
func (m *Model) Config() *model.Config { return m.Model.Config() }

// Close frees the cache, the weights and, unless it was given in Options,
// the backend.
func (m *Model) Close() error {
	var errs []error
	if m.Cache != nil {
		errs = append(errs, m.Cache.Close())
		m.Cache = nil
	}
	if m.Model != nil {
		errs = append(errs, m.Model.Close())
		m.Model = nil
	}
	if m.Backend != nil && m.ownsBackend {
		errs = append(errs, m.Backend.Close())
	}
	m.Backend = nil
	return errors.Join(errs...)
}

// ResolveSpec applies the defaults a model's cache adds to a spec: the
// rotation of the 4- and 2-bit formats unless the spec says norot
// (kv.Spec.WithDefaultRotation), and the adjustment terms a bw spec leaves
// open, from the model's settings (saying on the log, once, which terms bw
// specs use and where they came from).
func (m *Model) ResolveSpec(sp kv.Spec) kv.Spec {
	out := sp.WithDefaultRotation(m.Config().HeadDim).WithAdjust(m.Settings.BW.Adj8, m.Settings.BW.Adj4)
	if !sp.Planes.On || m.bwNoted {
		return out
	}
	r := out.Planes.Recon(sp.K.Elem)
	var terms string
	if sp.Planes.Adj8 == kv.AdjUnset {
		terms += fmt.Sprintf(" a8=%#x", r.Adj8)
	}
	if sp.Planes.Adj4 == kv.AdjUnset {
		terms += fmt.Sprintf(" a4=%#x", r.Adj4)
	}
	if terms != "" {
		m.logf("bw adjustment terms a spec leaves open come from the model's settings (%s):%s", m.Settings.From, terms)
		m.bwNoted = true
	}
	return out
}

// NewCache returns an empty KV cache of format spec for the model, on its
// backend (kvcache.New: the backend's own cache where it offers one), with
// the model's settings applied (ResolveSpec).
func (m *Model) NewCache(spec kv.Spec, o kvcache.Options) (kvcache.Cache, error) {
	if o.Log == nil {
		o.Log = m.log // a tensor-parallel cache says there when it replicates KV heads
	}
	return kvcache.New(m.Backend, m.Config(), m.ResolveSpec(spec), o)
}

// Encode tokenizes a prompt with BOS, as a user message in the model's chat
// template with chat.
func (m *Model) Encode(prompt string, chat bool) ([]int, error) {
	if chat {
		return m.Tokenizer.EncodeChat([]tokenizer.Message{{Role: "user", Content: prompt}}, tokenizer.ChatOptions{AddGenerationPrompt: true})
	}
	return m.Tokenizer.Encode(prompt, true), nil
}

// applyDEC sets the load options' DEC for weight format ws: k_chunk for
// every layer, k_chunk by projection (checked against the model at load),
// or the tuned picks of the settings file (every linear-layer shape of the
// model must be tuned), saying on the log what a tuned value chose.
func (m *Model) applyDEC(lo *model.LoadOptions, d DEC, ws wq.Spec) error {
	if d.On() && !ws.IsQuantized() {
		return fmt.Errorf("engine: DEC needs quantized weights (int8, int4, int3), not %s", ws.Short())
	}
	if d.ByLayer != nil {
		m.logf("DEC by projection: %s (every other linear layer without)", d.ByLayer)
		lo.DECKChunk, lo.DECByLayer = 0, d.ByLayer
		return nil
	}
	if d.TunedPct == 0 {
		lo.DECKChunk = d.KChunk
		return nil
	}
	label := "tuned:" + pct(d.TunedPct)
	key := model.DECSettingsKey(ws)
	tu := m.Settings.DEC[key]
	if tu == nil {
		return fmt.Errorf("engine: DEC %s: %s has no DEC tuning for %s weights; run: bitdecode tune dec --model %s --weights %s",
			label, filepath.Join(m.Dir, model.SettingsFile), key, m.Dir, key)
	}
	choices, err := tu.Choices(d.TunedPct)
	if err != nil {
		return fmt.Errorf("engine: DEC %s: %s: %w", label, m.Settings.From, err)
	}
	cfg, err := model.LoadConfig(filepath.Join(m.Dir, "config.json"))
	if err != nil {
		return err
	}
	shapes, err := model.LinearShapes(cfg)
	if err != nil {
		return err
	}
	var parts []string
	for _, sh := range shapes {
		c, ok := choices[sh.Shape]
		if !ok {
			return fmt.Errorf("engine: DEC %s: %s's %s tuning has no shape %v (%s); tune again for this model", label, m.Settings.From, key, sh.Shape, strings.Join(sh.Layers, "/"))
		}
		parts = append(parts, fmt.Sprintf("%v k_chunk %d n_tb %d", sh.Shape, c.KChunk, c.Blocks))
	}
	m.logf("DEC %s from %s (tuned on %s, %s): %s (q, k and v take the smallest of their shapes' k_chunk: one launch)", label, m.Settings.From, tu.Device, tu.Date, strings.Join(parts, ", "))
	lo.DECKChunk, lo.DECByShape = 0, choices
	return nil
}

// calibrate collects GPTQ's statistics from the model's 16-bit weights on
// the calibration text, saying on the log what it used.
func (m *Model) calibrate(c Calib) (map[string]*wq.Hessian, error) {
	if c.File == "" {
		return nil, errors.New("engine: GPTQ needs a calibration text (--calib FILE)")
	}
	text, err := os.ReadFile(c.File)
	if err != nil {
		return nil, fmt.Errorf("engine: calibration text: %w", err)
	}
	ids := m.Tokenizer.Encode(string(text), false)
	if n := c.MaxTokens; n == 0 && len(ids) > defaultCalibTokens {
		ids = ids[:defaultCalibTokens]
	} else if n > 0 && len(ids) > n {
		ids = ids[:n]
	}
	start := time.Now()
	cal, err := eval.Calibrate(context.Background(), m.Backend, m.Dir, ids, eval.CalibOptions{})
	if err != nil {
		return nil, err
	}
	line := fmt.Sprintf("calibration: %d tokens of %s in %v; DEC approximate top-k recall vs exact on these activations:", len(ids), c.File, time.Since(start).Round(time.Millisecond))
	for _, k := range eval.RecallKChunks {
		line += fmt.Sprintf(" k_chunk %d %.3f", k, cal.Recall[k])
	}
	m.logf("%s", line)
	return cal.Hessians, nil
}

// logf writes one line to the log, if any.
func (m *Model) logf(format string, args ...any) {
	if m.log != nil {
		fmt.Fprintf(m.log, format+"\n", args...)
	}
}

// pct formats a percentage as typed: 5 -> "5%".
func pct(p float64) string { return fmt.Sprintf("%g%%", p) }
