package eval

import (
	"context"
	"fmt"
	"io"
	"math"
	"runtime"
	"sync"
	"time"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/kvcache"
	"github.com/bitdecode/bitdecode/model"
)

// PPLOptions configure PPL.
type PPLOptions struct {
	// Ctx is the window length in tokens; windows start at 0, Ctx, 2·Ctx, ...
	Ctx int
	// Windows is how many windows to score (0: all that fit).
	Windows int
	// First is the index of the first window scored (windows before it are
	// skipped).
	First int
	// Chunk is the number of tokens fed per forward call. 1 is real decoding
	// (every token attends to the cache exactly as a generated token would);
	// larger chunks are faster and slightly harsher: a token also sees
	// blocks packed earlier within its own chunk quantized, where decoding
	// would still have had them in the fp16 residual.
	Chunk int
	// PackAll scores every token against a fully packed context, as the
	// fake-quantized reference does: chunks are rounded up to whole blocks of
	// every format, and each window's last partial block is completed with
	// the tokens that follow it in the text (repeats of the last token at
	// the end of the text) before its queries attend, so no scored token
	// reads its neighbours from the 16-bit residual block. Off, the last up
	// to Nr-1 positions of a window (and, with chunks shorter than a block,
	// more) read the residual, as decoding does; PPLResult.PackedShare says
	// how many scored tokens read a packed context.
	PackAll bool
	// Progress receives a line per window (nil: quiet).
	Progress io.Writer
	// NewCache makes a window's cache for a variant's model and KV format
	// (nil: kvcache.New on the variant's backend, unbounded).
	NewCache func(m model.Model, spec kv.Spec) (kvcache.Cache, error)
	// Probes, if not nil, returns positions of window w (tokens win) whose
	// token is also scored for top-1 accuracy on its own (e.g. ReuseProbes:
	// long-range retrieval targets). Position p is predicted by row p-1.
	Probes func(w int, win []int) []int
}

// PPLResult is one configuration's accuracy over the scored tokens.
type PPLResult struct {
	Name   string             `json:"name"`
	Spec   string             `json:"kv"`
	Weight model.WeightMemory `json:"weights"`
	PPL    float64            `json:"ppl"`
	KLD    float64            `json:"kld_vs_baseline"` // mean KL(baseline || format) per token, nats
	Top1   float64            `json:"top1_agreement"`  // share of positions whose argmax equals the baseline's
	Tokens int                `json:"tokens"`
	// Resolved is the format as resolved for the model's head dim (groups
	// clipped to D, defaults filled in).
	Resolved string `json:"kv_resolved"`
	// KVBits is the packed cache's bits per K or V element, scales and
	// zeros included, averaged over the layers (per-layer formats differ).
	KVBits float64 `json:"kv_bits"`
	// PackedShare is the share of scored tokens whose query attended to
	// packed blocks only (its own block included): 1 with PackAll; formats
	// without a residual block (bw) count as packed.
	PackedShare float64 `json:"packed_share"`
	// ProbeTop1 is the share of probe positions (PPLOptions.Probes) whose
	// argmax is the true token; Probes their number.
	ProbeTop1 float64 `json:"probe_top1,omitempty"`
	Probes    int     `json:"probes,omitempty"`
	// Read is what a bw cache's decode calls read (nil for other caches);
	// Traffic its plane bytes over an fp16 cache's.
	Read    *kvcache.ReadStats `json:"read,omitempty"`
	Traffic float64            `json:"read_vs_fp16,omitempty"`
}

// PPL scores tokens (no BOS: windows are cut from the running text) with
// each KV format in specs, the first being the baseline that KL divergence
// and top-1 agreement are measured against. All formats advance in lockstep
// chunk by chunk, so no logits are stored.
func PPL(ctx context.Context, be backend.Backend, m model.Model, tokens []int, specs []kv.Spec, o PPLOptions) ([]PPLResult, error) {
	vs := make([]PPLVariant, len(specs))
	for i, sp := range specs {
		vs[i] = PPLVariant{Name: sp.String(), Model: m, KV: sp}
	}
	return PPLVariants(ctx, be, vs, tokens, o)
}

// PPLVariant is one configuration PPLVariants scores: a model (its
// weights in some format, with or without DEC) and a KV format. Variants may
// share a model.
type PPLVariant struct {
	Name  string
	Model model.Model
	KV    kv.Spec
}

// PPLVariants is PPL over configurations that may differ in their
// weights as well as their KV format: the first variant is the baseline. All
// models must be loaded on be and share one config.
func PPLVariants(ctx context.Context, be backend.Backend, variants []PPLVariant, tokens []int, o PPLOptions) ([]PPLResult, error) {
	if o.Ctx < 2 || o.Chunk < 1 {
		return nil, fmt.Errorf("eval: ctx %d and chunk %d must be >= 2 and >= 1", o.Ctx, o.Chunk)
	}
	if len(variants) == 0 {
		return nil, fmt.Errorf("eval: no configurations")
	}
	cfg := variants[0].Model.Config()
	for _, v := range variants[1:] {
		if c := v.Model.Config(); c.Vocab != cfg.Vocab || c.Layers != cfg.Layers || c.Hidden != cfg.Hidden {
			return nil, fmt.Errorf("eval: %s is a different model than %s", v.Name, variants[0].Name)
		}
	}
	if maxPos := cfg.MaxPositions; maxPos > 0 && o.Ctx > maxPos {
		return nil, fmt.Errorf("eval: ctx %d exceeds the model's %d positions", o.Ctx, maxPos)
	}
	if o.First < 0 {
		return nil, fmt.Errorf("eval: first window %d, want >= 0", o.First)
	}
	windows := len(tokens)/o.Ctx - o.First
	if o.Windows > 0 {
		windows = min(windows, o.Windows)
	}
	if windows <= 0 {
		return nil, fmt.Errorf("eval: %d tokens do not fill window %d of %d tokens", len(tokens), o.First, o.Ctx)
	}
	// Each format's block (Nr; bw keeps no residual: 1), and the chunk and
	// fed length that PackAll needs.
	nrs := make([]int, len(variants))
	resolved := make([]string, len(variants))
	bits := make([]float64, len(variants))
	block := 1
	for i, v := range variants {
		f, err := v.KV.Resolve(cfg.HeadDim)
		if err != nil {
			return nil, fmt.Errorf("eval: %s: %w", v.Name, err)
		}
		resolved[i], nrs[i] = f.Spec.String(), 1
		_, fs, err := kvcache.LayerFormats(cfg, v.KV)
		if err != nil {
			return nil, fmt.Errorf("eval: %s: %w", v.Name, err)
		}
		for _, lf := range fs {
			bits[i] += lf.BitsPerElement() / float64(len(fs))
		}
		if !f.Planes.On {
			nrs[i] = f.Residual
		}
		block = lcm(block, nrs[i])
	}
	chunk := o.Chunk
	if o.PackAll {
		chunk = (chunk + block - 1) / block * block
	}
	packed := make([]int, len(variants)) // scored tokens that read a packed context
	sums := make([]pplSums, len(variants))
	hits := make([]int, len(variants))
	reads := make([]*kvcache.ReadStats, len(variants))
	probes := 0
	n := 0
	start := time.Now()
	for w := 0; w < windows; w++ {
		start0 := (o.First + w) * o.Ctx
		win := tokens[start0 : start0+o.Ctx]
		// The tokens fed: the window's but its last (only a target), and
		// with PackAll the text after it up to a whole block.
		feed := win[:len(win)-1]
		if o.PackAll {
			feed = completeBlock(tokens, start0, len(feed), block, cfg.MaxPositions)
		}
		caches := make([]kvcache.Cache, len(variants))
		closeAll := func() {
			for _, c := range caches {
				if c != nil {
					c.Close()
				}
			}
		}
		for i, v := range variants {
			var err error
			if o.NewCache != nil {
				caches[i], err = o.NewCache(v.Model, v.KV)
			} else {
				caches[i], err = kvcache.New(be, v.Model.Config(), v.KV, kvcache.Options{})
			}
			if err != nil {
				closeAll()
				return nil, err
			}
		}
		var probe []int
		if o.Probes != nil {
			probe = o.Probes(o.First+w, win)
		}
		for pos := 0; pos < len(feed); pos += chunk {
			end := min(len(feed), pos+chunk)
			var b model.Batch
			ids := make([]int32, end-pos)
			for i, t := range feed[pos:end] {
				ids[i] = int32(t)
			}
			b.Add(0, pos, ids...)
			b.AllLogits = true
			all := make([]*model.Logits, len(variants))
			for i, v := range variants {
				lg, err := v.Model.Forward(&b, caches[i])
				if err != nil {
					closeAll()
					return nil, fmt.Errorf("eval: %s: %w", v.Name, err)
				}
				all[i] = lg
			}
			// Score the rows whose target is in the window.
			scored := max(0, min(end, len(win)-1)-pos)
			scoreChunk(all, win[pos+1:pos+1+scored], sums)
			for i, nr := range nrs {
				for p := pos; p < pos+scored; p++ {
					if (p/nr+1)*nr <= end || nr == 1 {
						packed[i]++
					}
				}
			}
			for _, p := range probe {
				if p < pos+1 || p > pos+scored {
					continue
				}
				probes++
				for i, lg := range all {
					if model.Argmax(lg.Row(p-1-pos)) == win[p] {
						hits[i]++
					}
				}
			}
			if err := ctx.Err(); err != nil {
				closeAll()
				return nil, err
			}
		}
		for i, c := range caches {
			if st, ok := c.TierStats(); ok {
				if reads[i] == nil {
					reads[i] = &kvcache.ReadStats{}
				}
				*reads[i] = reads[i].Add(st.Read)
			}
		}
		closeAll()
		n += len(win) - 1
		if o.Progress != nil {
			el := time.Since(start)
			eta := time.Duration(float64(el) / float64(w+1) * float64(windows-w-1))
			fmt.Fprintf(o.Progress, "window %d/%d (%d tokens scored, %v, about %v left):", w+1, windows, n, el.Round(time.Second), eta.Round(time.Second))
			for i, v := range variants {
				fmt.Fprintf(o.Progress, " %s %.4f", v.Name, math.Exp(sums[i].nll/float64(n)))
			}
			fmt.Fprintln(o.Progress)
		}
	}
	res := make([]PPLResult, len(variants))
	for i, v := range variants {
		res[i] = PPLResult{Name: v.Name, Spec: v.KV.String(), Weight: model.WeightMemoryOf(v.Model), PPL: math.Exp(sums[i].nll / float64(n)), KLD: sums[i].kld / float64(n),
			Top1: sums[i].agree / float64(n), Tokens: n, Resolved: resolved[i], KVBits: bits[i], PackedShare: float64(packed[i]) / float64(n)}
		if i == 0 {
			res[i].Top1 = 1
		}
		if probes > 0 {
			res[i].ProbeTop1, res[i].Probes = float64(hits[i])/float64(probes), probes
		}
		if reads[i] != nil {
			res[i].Read, res[i].Traffic = reads[i], reads[i].Traffic()
		}
	}
	return res, nil
}

// pplSums accumulates one format's scores.
type pplSums struct{ nll, kld, agree float64 }

// scoreChunk adds the scores of one chunk: all[i] holds format i's logits
// for the chunk's rows, targets the next token of each row. Rows are scored
// in parallel; the sums are added in row order, so the result does not
// depend on the number of goroutines.
func scoreChunk(all []*model.Logits, targets []int, sums []pplSums) {
	rows := len(targets)
	per := make([][]pplSums, rows)
	workers := min(runtime.GOMAXPROCS(0), rows)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for r := w; r < rows; r += workers {
				out := make([]pplSums, len(all))
				bp := logSoftmax(all[0].Row(r))
				top := model.Argmax(all[0].Row(r))
				for i, lg := range all {
					if i == 0 {
						out[0].nll = -bp[targets[r]]
						continue
					}
					lp := logSoftmax(lg.Row(r))
					out[i].nll = -lp[targets[r]]
					var kl float64
					for v := range bp {
						kl += math.Exp(bp[v]) * (bp[v] - lp[v])
					}
					out[i].kld = kl
					if model.Argmax(lg.Row(r)) == top {
						out[i].agree = 1
					}
				}
				per[r] = out
			}
		})
	}
	wg.Wait()
	for _, out := range per {
		for i := range sums {
			sums[i].nll += out[i].nll
			sums[i].kld += out[i].kld
			sums[i].agree += out[i].agree
		}
	}
}

// logSoftmax returns log p in float64.
func logSoftmax(x []float32) []float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = math.Max(m, float64(v))
	}
	var s float64
	for _, v := range x {
		s += math.Exp(float64(v) - m)
	}
	lse := m + math.Log(s)
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v) - lse
	}
	return out
}

// completeBlock returns the n tokens fed for the window at start of tokens,
// extended to a whole number of blocks with the tokens that follow in the
// text (repeats of the last token past its end), within maxPos positions
// (0: no limit).
func completeBlock(tokens []int, start, n, block, maxPos int) []int {
	want := (n + block - 1) / block * block
	if maxPos > 0 {
		want = min(want, maxPos)
	}
	want = max(want, n)
	out := make([]int, want)
	for i := range out {
		j := min(start+i, len(tokens)-1)
		out[i] = tokens[j]
	}
	return out
}

func lcm(a, b int) int {
	g, h := a, b
	for h != 0 {
		g, h = h, g%h
	}
	return a / g * b
}
