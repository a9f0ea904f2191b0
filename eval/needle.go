package eval

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/kvcache"
	"github.com/bitdecode/bitdecode/model"
	"github.com/bitdecode/bitdecode/tokenizer"
)

// Needle retrieval: a long-context recall test for KV formats. A line that
// binds a random name to a random number (the needle) is put into running
// text at some depth of a long context; at the end of the context the
// binding begins again, and the model must copy the number from far back.
// The number's tokens are scored teacher-forced: a probe is recalled when
// every one of them is the model's top-1. Perplexity averages over mostly
// local predictions and hides a format that loses distant tokens; this
// measures exactly that, at chosen distances.

// NeedleOptions configure Needle.
type NeedleOptions struct {
	// Ctx is each probe's context in tokens (needle, filler and the query).
	Ctx int
	// Depths are where the needle goes, as fractions of the context
	// (0: at the start; 0.9: 10% of the context before the query).
	Depths []float64
	// Trials is the number of probes per depth (each a new name, number
	// and stretch of filler).
	Trials int
	// Chunk is the number of tokens fed per forward call; PackAll as in
	// PPLOptions (the probes' own tokens then read a packed context too).
	Chunk   int
	PackAll bool
	// Seed makes the names, numbers and filler positions.
	Seed uint64
	// NewCache makes a probe's cache (nil: kvcache.New, unbounded).
	NewCache func(m model.Model, spec kv.Spec) (kvcache.Cache, error)
	// Progress receives a line per depth (nil: quiet).
	Progress io.Writer
}

// NeedleResult is one configuration's recall.
type NeedleResult struct {
	Name string `json:"name"`
	Spec string `json:"kv"`
	// Recall[i] is the share of probes at Depths[i] recalled; All over all
	// depths.
	Depths []float64 `json:"depths"`
	Recall []float64 `json:"recall"`
	All    float64   `json:"recall_all"`
	Probes int       `json:"probes"`
}

// needleProbe is one probe: its tokens and where the number's tokens are
// scored.
type needleProbe struct {
	tokens  []int
	targets []int // positions of the number's tokens in the query
}

// makeNeedle builds a probe of ctx tokens: filler from text starting at
// off, the needle at depth, the query at the end.
func makeNeedle(tok *tokenizer.Tokenizer, text []int, off, ctx int, depth float64, r *rand.Rand) (needleProbe, error) {
	const letters = "abcdefghijklmnopqrstuvwxyz"
	name := "cfg"
	for range 6 {
		name += string(letters[r.IntN(len(letters))])
	}
	number := fmt.Sprintf("%d", 10000+r.IntN(90000))
	line := fmt.Sprintf("\n\t%s := %s // keep\n", name, number)
	needle := tok.Encode(line, false)
	// The query repeats the needle's own tokens up to the number, so the
	// model sees the binding begin exactly as before; the targets are the
	// tokens that spell the number (with its leading space).
	numStart := strings.Index(line, " "+number)
	numEnd := numStart + 1 + len(number)
	off0, first, last := 0, -1, -1
	for i, id := range needle {
		piece := tok.Decode([]int{id})
		if off0 < numEnd && off0+len(piece) > numStart {
			if first < 0 {
				first = i
			}
			last = i
		}
		off0 += len(piece)
	}
	if first < 1 {
		return needleProbe{}, fmt.Errorf("eval: needle: the number of %q has no tokens of its own", line)
	}
	query, value := needle[:first], needle[first:last+1]
	n := ctx - len(needle) - len(query) - len(value)
	if n < 16 || off+n > len(text) {
		return needleProbe{}, fmt.Errorf("eval: needle: %d tokens of text at %d do not fill a context of %d", len(text)-off, off, ctx)
	}
	at := int(depth * float64(n))
	p := needleProbe{tokens: make([]int, 0, ctx)}
	p.tokens = append(p.tokens, text[off:off+at]...)
	p.tokens = append(p.tokens, needle...)
	p.tokens = append(p.tokens, text[off+at:off+n]...)
	p.tokens = append(p.tokens, query...)
	for range value {
		p.targets = append(p.targets, len(p.tokens))
		p.tokens = append(p.tokens, value[len(p.targets)-1])
	}
	return p, nil
}

// Needle runs needle probes through every variant (the same probes for
// all) and reports the share recalled per depth. text is running text to
// take filler from (tokens, no BOS).
func Needle(ctx context.Context, be backend.Backend, variants []PPLVariant, tok *tokenizer.Tokenizer, text []int, o NeedleOptions) ([]NeedleResult, error) {
	if len(variants) == 0 || o.Ctx < 64 || o.Trials < 1 || len(o.Depths) == 0 || o.Chunk < 1 {
		return nil, fmt.Errorf("eval: needle: want variants, a context of at least 64 tokens, trials, depths and a chunk")
	}
	cfg := variants[0].Model.Config()
	if cfg.MaxPositions > 0 && o.Ctx > cfg.MaxPositions {
		return nil, fmt.Errorf("eval: needle: ctx %d exceeds the model's %d positions", o.Ctx, cfg.MaxPositions)
	}
	r := rand.New(rand.NewPCG(o.Seed, 0x6e65656460))
	res := make([]NeedleResult, len(variants))
	for i, v := range variants {
		res[i] = NeedleResult{Name: v.Name, Spec: v.KV.String(), Depths: o.Depths, Recall: make([]float64, len(o.Depths))}
	}
	hits := make([][]int, len(variants))
	for i := range hits {
		hits[i] = make([]int, len(o.Depths))
	}
	start := time.Now()
	for di, depth := range o.Depths {
		for range o.Trials {
			off := r.IntN(max(1, len(text)-o.Ctx))
			p, err := makeNeedle(tok, text, off, o.Ctx, depth, r)
			if err != nil {
				return nil, err
			}
			for i, v := range variants {
				ok, err := recallProbe(ctx, be, v, p, o)
				if err != nil {
					return nil, fmt.Errorf("eval: needle: %s: %w", v.Name, err)
				}
				if ok {
					hits[i][di]++
				}
			}
		}
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "needle depth %.2f (%d/%d, %v):", depth, di+1, len(o.Depths), time.Since(start).Round(time.Second))
			for i, v := range variants {
				fmt.Fprintf(o.Progress, " %s %d/%d", v.Name, hits[i][di], o.Trials)
			}
			fmt.Fprintln(o.Progress)
		}
	}
	for i := range res {
		total := 0
		for di := range o.Depths {
			res[i].Recall[di] = float64(hits[i][di]) / float64(o.Trials)
			total += hits[i][di]
		}
		res[i].Probes = o.Trials * len(o.Depths)
		res[i].All = float64(total) / float64(res[i].Probes)
	}
	return res, nil
}

// recallProbe feeds probe p through variant v and reports whether every
// token of the number is the top-1 prediction.
func recallProbe(ctx context.Context, be backend.Backend, v PPLVariant, p needleProbe, o NeedleOptions) (bool, error) {
	var c kvcache.Cache
	var err error
	if o.NewCache != nil {
		c, err = o.NewCache(v.Model, v.KV)
	} else {
		c, err = kvcache.New(be, v.Model.Config(), v.KV, kvcache.Options{})
	}
	if err != nil {
		return false, err
	}
	defer c.Close()
	feed := p.tokens[:len(p.tokens)-1] // the last token is only a target
	chunk := o.Chunk
	if o.PackAll {
		f, err := v.KV.Resolve(v.Model.Config().HeadDim)
		if err != nil {
			return false, err
		}
		if !f.Planes.On {
			chunk = (chunk + f.Residual - 1) / f.Residual * f.Residual
			// Complete the query's block with copies of its last token:
			// the number's own tokens then read a packed context too.
			n := (len(feed) + f.Residual - 1) / f.Residual * f.Residual
			if mp := v.Model.Config().MaxPositions; mp > 0 {
				n = min(n, mp)
			}
			for len(feed) < n {
				feed = append(feed[:len(feed):len(feed)], feed[len(feed)-1])
			}
		}
	}
	first := p.targets[0] - 1 // the row that predicts the first target
	all := true
	for pos := 0; pos < len(feed); pos += chunk {
		end := min(len(feed), pos+chunk)
		var b model.Batch
		ids := make([]int32, end-pos)
		for i, t := range feed[pos:end] {
			ids[i] = int32(t)
		}
		b.Add(0, pos, ids...)
		b.AllLogits = end > first
		lg, err := v.Model.Forward(&b, c)
		if err != nil {
			return false, err
		}
		if err := ctx.Err(); err != nil {
			return false, err
		}
		if !b.AllLogits {
			continue
		}
		for _, t := range p.targets {
			if row := t - 1 - pos; row >= 0 && row < end-pos {
				all = all && model.Argmax(lg.Row(row)) == p.tokens[t]
			}
		}
	}
	return all, nil
}
