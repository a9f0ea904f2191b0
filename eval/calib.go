package eval

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/kvcache"
	"github.com/bitdecode/bitdecode/model"
	"github.com/bitdecode/bitdecode/wq"
)

// CalibOptions configure Calibrate.
type CalibOptions struct {
	// Ctx is the window length: the calibration tokens are cut into windows
	// of Ctx tokens, each run from position 0 (default 2048).
	Ctx int
	// Chunk is the number of tokens per forward call (default 256).
	Chunk int
}

// Calibration is what Calibrate measured.
type Calibration struct {
	// Hessians holds H = Σ x xᵀ of every linear layer's input by checkpoint
	// tensor name: what GPTQ needs (model.LoadOptions.Calib). Layers that read
	// the same input (q, k, v; gate, up) share one Hessian.
	Hessians map[string]*wq.Hessian
	// Recall maps a DEC k_chunk to the mean recall of wq.SelectApprox
	// against wq.SelectExact over the real linear inputs seen (every
	// recallStride-th token of each distinct input).
	Recall  map[int]float64
	recallN map[int]int
}

// RecallKChunks are the k_chunk values Calibrate measures the top-k recall at.
var RecallKChunks = []int{8, 16, 32, 64}

// recallStride subsamples tokens for the recall measurement (an exact top-k
// sorts every chunk).
const recallStride = 16

// Calibrate runs the model in dir (loaded with its stored weights, fp16 KV)
// over the calibration tokens and returns the Hessians of every linear
// layer's input and the recall of DEC's approximate top-k on those inputs.
func Calibrate(ctx context.Context, be backend.Backend, dir string, tokens []int, o CalibOptions) (*Calibration, error) {
	if o.Ctx <= 0 {
		o.Ctx = 2048
	}
	if o.Chunk <= 0 {
		o.Chunk = 256
	}
	if len(tokens) < 2 {
		return nil, fmt.Errorf("eval: calibrate: %d calibration tokens", len(tokens))
	}
	cal := &Calibration{Hessians: map[string]*wq.Hessian{}, Recall: map[int]float64{}, recallN: map[int]int{}}
	rec := &hessianRecorder{Backend: be, hs: cal.Hessians, cal: cal}
	m, err := model.Load(dir, rec, model.LoadOptions{})
	if err != nil {
		return nil, fmt.Errorf("eval: calibrate: %w", err)
	}
	defer m.Close()
	spec, err := kv.ParseSpec("fp16")
	if err != nil {
		return nil, err
	}
	for w0 := 0; w0 < len(tokens); w0 += o.Ctx {
		win := tokens[w0:min(len(tokens), w0+o.Ctx)]
		if m.Config().MaxPositions > 0 && len(win) > m.Config().MaxPositions {
			win = win[:m.Config().MaxPositions]
		}
		cache, err := kvcache.NewPaged(rec, m.Config(), spec, kvcache.Options{})
		if err != nil {
			return nil, err
		}
		for pos := 0; pos < len(win); pos += o.Chunk {
			end := min(len(win), pos+o.Chunk)
			ids := make([]int32, end-pos)
			for i, t := range win[pos:end] {
				ids[i] = int32(t)
			}
			var b model.Batch
			b.Add(0, pos, ids...)
			if _, err := m.Forward(&b, cache); err != nil {
				return nil, fmt.Errorf("eval: calibrate: %w", err)
			}
			if rec.err != nil {
				return nil, fmt.Errorf("eval: calibrate: %w", rec.err)
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
	}
	for k, n := range cal.recallN {
		cal.Recall[k] /= float64(max(n, 1))
	}
	return cal, nil
}

// hessianRecorder wraps a backend and accumulates the Hessian of every
// Linear's input. A Linear whose input holds exactly the values of the
// previous Linear's input (q, k, v read one x; gate and up another) shares
// that Hessian instead of accumulating a copy.
type hessianRecorder struct {
	backend.Backend
	hs    map[string]*wq.Hessian
	last  []float32
	lastH *wq.Hessian
	buf   []float32
	err   error
	cal   *Calibration
}

// PadHeadDim implements backend.HeadDimPadder as the wrapped backend does
// (the model is calibrated with the heads it will be loaded with: o_proj's
// Hessian spans the padded width; padded channels are never activated).
func (r *hessianRecorder) PadHeadDim(d int) (int, bool) {
	if p, ok := r.Backend.(backend.HeadDimPadder); ok {
		return p.PadHeadDim(d)
	}
	return d, true
}

// Linear implements backend.Backend: it records x's Hessian, then runs the
// wrapped Linear.
func (r *hessianRecorder) Linear(dst, x backend.Tensor, w backend.Weight, bias backend.Weight) {
	if r.err == nil {
		if err := r.record(x, w); err != nil {
			r.err = err
		}
	}
	r.Backend.Linear(dst, x, w, bias)
}

// LinearGroup implements backend.Backend as one recorded Linear per
// weight (the layers share x, so all but the first share its Hessian).
func (r *hessianRecorder) LinearGroup(dsts []backend.Tensor, x backend.Tensor, ws, biases []backend.Weight) {
	if err := backend.CheckLinearGroup(dsts, x, ws, biases); err != nil {
		r.Backend.LinearGroup(dsts, x, ws, biases) // records the error
		return
	}
	for i, w := range ws {
		r.Linear(dsts[i], x, w, backend.BiasAt(biases, i))
	}
}

func (r *hessianRecorder) record(x backend.Tensor, w backend.Weight) error {
	T, K := backend.Matrix(x.Shape())
	if T*K <= 0 {
		return nil
	}
	if cap(r.buf) < T*K {
		r.buf = make([]float32, T*K)
	}
	r.buf = r.buf[:T*K]
	if err := r.Backend.Download(r.buf, x); err != nil {
		return fmt.Errorf("recording the input of %s: %w", w.Name(), err)
	}
	name := w.Name()
	if r.lastH != nil && r.lastH.K == K && slices.EqualFunc(r.buf, r.last, func(a, b float32) bool {
		return math.Float32bits(a) == math.Float32bits(b)
	}) {
		if h := r.hs[name]; h == nil {
			r.hs[name] = r.lastH
		}
		if r.hs[name] == r.lastH {
			return nil
		}
	}
	h := r.hs[name]
	if h == nil {
		h = wq.NewHessian(K)
		r.hs[name] = h
	}
	if h.K != K {
		return fmt.Errorf("input of %s has %d channels, earlier %d", name, K, h.K)
	}
	if err := h.Add(r.buf, T); err != nil {
		return fmt.Errorf("input of %s: %w", name, err)
	}
	for t := 0; t < T; t += recallStride {
		x := r.buf[t*K : (t+1)*K]
		for _, k := range RecallKChunks {
			r.cal.Recall[k] += wq.Recall(wq.SelectApprox(nil, x, k), wq.SelectExact(nil, x, k))
			r.cal.recallN[k]++
		}
	}
	r.last = append(r.last[:0], r.buf...)
	r.lastH = h
	return nil
}
