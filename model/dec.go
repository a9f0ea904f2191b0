package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/bitdecode/bitdecode/wq"
)

// Shape is the [N, K] of a linear layer's weight: N outputs, K inputs.
type Shape struct{ N, K int }

// String returns "NxK" (4096x14336), the form the settings file and the
// tables use.
func (s Shape) String() string { return fmt.Sprintf("%dx%d", s.N, s.K) }

// DECChoice is the DEC setting of one linear-layer shape: k_chunk (0: no
// DEC for that shape) and n_tb, the GPU thread blocks of the compensation
// (0: the backend's default).
type DECChoice struct {
	KChunk int `json:"k_chunk"`
	Blocks int `json:"n_tb"`
}

// LinearShape is one distinct shape of a model's quantizable linear layers,
// with the layers that have it ("q_proj", "o_proj") and how many matrices
// of the model do (layers × names).
type LinearShape struct {
	Shape
	Layers []string
	Count  int
}

// LinearShapes returns the distinct shapes of cfg's linear layers (the
// weights LoadOptions.Weights quantizes), in the order the layers first
// use them.
func LinearShapes(cfg *Config) ([]LinearShape, error) {
	if _, ok := families[cfg.ModelType]; !ok {
		return nil, fmt.Errorf("model: %w %q; supported: %s", ErrUnsupportedArchitecture, cfg.ModelType, supportedList())
	}
	ld := &loader{}
	setupLlama(cfg, ld) // every registered family is a Llama
	m := &Llama{Layers: newLayers(cfg)}
	var specs []weightSpec
	if err := ld.collect(reflect.ValueOf(m).Elem(), nil, &specs); err != nil {
		return nil, err
	}
	var out []LinearShape
	for _, s := range specs {
		if !s.linear {
			continue
		}
		sh := Shape{s.shape[0], s.shape[1]}
		i := slices.IndexFunc(out, func(l LinearShape) bool { return l.Shape == sh })
		if i < 0 {
			out = append(out, LinearShape{Shape: sh})
			i = len(out) - 1
		}
		parts := strings.Split(s.name, ".") // model.layers.0.self_attn.q_proj.weight
		name := parts[max(0, len(parts)-2)]
		if !slices.Contains(out[i].Layers, name) {
			out[i].Layers = append(out[i].Layers, name)
		}
		out[i].Count++
	}
	return out, nil
}

// DECTuning is what 'bitdecode tune dec' measured for one weight format on
// one device: per linear-layer shape, the base GEMV time and, for each
// slowdown target, the largest k_chunk (with its best n_tb) whose decode
// step stays within it. It is stored in the settings file under
// "dec" → weight format (DECSettingsKey); docs/weights.md has the schema.
type DECTuning struct {
	Device   string           `json:"device"`            // the GPU's name
	Mode     string           `json:"mode"`              // "serial" (or "fused")
	Residual string           `json:"residual"`          // the residual's element type ("int4")
	Tokens   int              `json:"tokens"`            // rows of x per timed step (1: decode)
	Date     string           `json:"date,omitempty"`    // UTC, YYYY-MM-DD
	Source   string           `json:"source,omitempty"`  // the command that measured it
	Shapes   []DECShapeTuning `json:"shapes"`            // one per distinct [N, K]
	Targets  []float64        `json:"targets,omitempty"` // the slowdown targets tuned for, percent
}

// DECShapeTuning is one shape's measurements and picks.
type DECShapeTuning struct {
	N      int        `json:"n"`
	K      int        `json:"k"`
	Layers []string   `json:"layers,omitempty"`
	BaseUS float64    `json:"base_us"`            // the base GEMV alone, median microseconds
	Picks  []DECPick  `json:"picks"`              // one per target, increasing
	Points []DECPoint `json:"measured,omitempty"` // every (k_chunk, n_tb) timed
}

// DECPick is the choice for one slowdown target: the largest k_chunk whose
// base + DEC time is at most (1 + target) times the base, at the n_tb that
// was fastest for it; k_chunk 0 when even the smallest tried was too slow.
type DECPick struct {
	SlowdownPct float64 `json:"slowdown_pct"` // the target, percent (5 = 5%)
	KChunk      int     `json:"k_chunk"`
	Blocks      int     `json:"n_tb"`
	US          float64 `json:"us"`           // base + DEC, median microseconds
	OverheadPct float64 `json:"overhead_pct"` // 100·(US/BaseUS − 1)
}

// DECPoint is one timed (k_chunk, n_tb): base GEMV plus DEC, median
// microseconds, and DEC alone.
type DECPoint struct {
	KChunk int     `json:"k_chunk"`
	Blocks int     `json:"n_tb"`
	US     float64 `json:"us"`
	DECUS  float64 `json:"dec_us,omitempty"`
}

// DECSettingsKey returns the settings file's key for weight format s: the
// element type and a group size other than the default ("int4",
// "int3:g64"); the method (RTN, GPTQ) does not change the kernels' speed.
func DECSettingsKey(s wq.Spec) string {
	return wq.Spec{Elem: s.Elem, Group: s.Group, Method: wq.RTN, Head: wq.DefaultHead}.Short()
}

// samePct reports whether two slowdown targets in percent are the same.
func samePct(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// Choices returns the DEC choice of every tuned shape for the slowdown
// target pct (percent, one of the tuned targets).
func (t *DECTuning) Choices(pct float64) (map[Shape]DECChoice, error) {
	out := map[Shape]DECChoice{}
	for _, s := range t.Shapes {
		i := slices.IndexFunc(s.Picks, func(p DECPick) bool { return samePct(p.SlowdownPct, pct) })
		if i < 0 {
			return nil, fmt.Errorf("no pick for a %g%% slowdown for shape %dx%d (tuned: %s)", pct, s.N, s.K, t.targetList())
		}
		out[Shape{s.N, s.K}] = DECChoice{KChunk: s.Picks[i].KChunk, Blocks: s.Picks[i].Blocks}
	}
	return out, nil
}

// targetList lists the tuned targets for messages ("2.5%, 5%").
func (t *DECTuning) targetList() string {
	var seen []string
	for _, s := range t.Shapes {
		for _, p := range s.Picks {
			v := fmt.Sprintf("%g%%", p.SlowdownPct)
			if !slices.Contains(seen, v) {
				seen = append(seen, v)
			}
		}
	}
	if len(seen) == 0 {
		return "none"
	}
	return strings.Join(seen, ", ")
}

// validate checks the numbers a hand-edited file could get wrong.
func (t *DECTuning) validate() error {
	if t == nil {
		return errors.New("null tuning")
	}
	for _, s := range t.Shapes {
		if s.N <= 0 || s.K <= 0 {
			return fmt.Errorf("shape %dx%d", s.N, s.K)
		}
		for _, p := range s.Picks {
			if p.KChunk < 0 || p.Blocks < 0 || !(p.SlowdownPct > 0) {
				return fmt.Errorf("shape %dx%d: pick k_chunk %d, n_tb %d for %g%%: want non-negative k_chunk and n_tb and a positive target",
					s.N, s.K, p.KChunk, p.Blocks, p.SlowdownPct)
			}
		}
	}
	return nil
}

// SaveDECTuning stores t under "dec" → key in the settings file at path,
// keeping everything else the file holds (other formats' tunings, "bw",
// keys this version does not know). The file is replaced atomically.
func SaveDECTuning(path, key string, t *DECTuning) error {
	if err := t.validate(); err != nil {
		return fmt.Errorf("model: DEC tuning: %w", err)
	}
	top := map[string]json.RawMessage{}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("model: settings: %w", err)
	default:
		if err := json.Unmarshal(data, &top); err != nil {
			return fmt.Errorf("model: settings %s: %w (not overwritten)", path, err)
		}
	}
	dec := map[string]json.RawMessage{}
	if raw, ok := top["dec"]; ok {
		if err := json.Unmarshal(raw, &dec); err != nil {
			return fmt.Errorf("model: settings %s: dec: %w (not overwritten)", path, err)
		}
	}
	if dec[key], err = json.Marshal(t); err != nil {
		return err
	}
	if top["dec"], err = json.Marshal(dec); err != nil {
		return err
	}
	out, err := json.MarshalIndent(top, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".bitdecode-*.json")
	if err != nil {
		return fmt.Errorf("model: settings: %w", err)
	}
	_, err = tmp.Write(append(out, '\n'))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("model: settings %s: %w", path, err)
	}
	return nil
}

// decJoined are the linear layers of an attention block that a backend
// joins into one launch only when their DEC agrees (backend/gpu's
// JoinWeights: every member with the same k_chunk, or, since session 23,
// a run of members at one k_chunk and the others none): q, k and v. The
// choices by shape keep them at one k_chunk (decByLayer); DECAlloc's by
// projection do not (decByKind). The other joined groups (gate|up, the shared expert's and each
// routed expert's gate|up) are one shape each, so choices by shape agree on
// them already.
var decJoined = []string{"q_proj", "k_proj", "v_proj"}

// linearKind splits a linear weight's tensor name
// ("model.layers.0.self_attn.q_proj.weight") into its layer's prefix
// ("model.layers.0.self_attn") and its kind ("q_proj").
func linearKind(name string) (prefix, kind string) {
	parts := strings.Split(name, ".")
	if len(parts) < 2 {
		return "", name
	}
	return strings.Join(parts[:len(parts)-2], "."), parts[len(parts)-2]
}

// decByLayer returns the DEC choice of every linear weight of specs, by
// tensor name: choose's for its shape, except that the q, k and v of one
// layer, where their shapes' choices differ, all take the smallest k_chunk
// among them (n_tb 0, the backend's default, where it is not a member's
// own). A group split by DEC would run as three launches, which costs more
// than DEC on q saves (session 20: the 8B's step with q at k 4 and k, v at
// k 0 was +15%, k 4 on every layer +5%), and no member pays more than its
// own choice was tuned for.
func decByLayer(specs []weightSpec, choose func(N, K int) DECChoice) map[string]DECChoice {
	out := make(map[string]DECChoice, len(specs))
	groups := map[string][]string{} // a layer's prefix → its q, k and v
	for _, s := range specs {
		if !s.linear || len(s.shape) != 2 {
			continue
		}
		out[s.name] = choose(s.shape[0], s.shape[1])
		if prefix, kind := linearKind(s.name); slices.Contains(decJoined, kind) {
			groups[prefix] = append(groups[prefix], s.name)
		}
	}
	for _, names := range groups {
		least := out[names[0]]
		for _, n := range names[1:] {
			if out[n].KChunk < least.KChunk {
				least = out[n]
			}
		}
		for _, n := range names {
			if out[n].KChunk != least.KChunk {
				out[n] = DECChoice{KChunk: least.KChunk}
			}
		}
	}
	return out
}

// DECAlloc is a DEC choice by projection: k_chunk for each kind of linear
// layer it names ("down_proj": 32, "v_proj": 256), every layer of that kind
// alike; a kind it does not name has no DEC. Unlike the choices by shape
// (decByLayer), the q, k and v of a layer keep their own k_chunk: a backend
// that joins them (backend/gpu) runs the members without DEC at k_chunk 0 in
// the joined launch (docs/perf/dec.md, "Session 23").
type DECAlloc map[string]int

// DECProjections are the linear layer kinds a DECAlloc may name, in the
// order String lists them: those of every supported family (Llama's).
var DECProjections = []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}

// decAllocSep joins a DECAlloc's entries in its canonical form; ParseDECAlloc
// also takes commas ("down_proj:32,v_proj:256"), which lists of DEC
// settings use between settings.
const decAllocSep = "+"

// IsDECAllocEntry reports whether s looks like one entry of a DECAlloc
// ("v_proj:256"): a name, a colon and anything after. Lists of --dec-k
// values use it to tell an entry from a k_chunk or tuned:P%.
func IsDECAllocEntry(s string) bool {
	name, _, ok := strings.Cut(strings.TrimSpace(s), ":")
	return ok && strings.HasSuffix(name, "_proj")
}

// ParseDECAlloc parses "name:k" entries separated by '+' or ','
// ("down_proj:32+v_proj:256+o_proj:64"): each name one of DECProjections,
// at most once, each k a non-negative k_chunk (0: that kind off). The
// errors name the bad entry and the valid names.
func ParseDECAlloc(s string) (DECAlloc, error) {
	a := DECAlloc{}
	for _, e := range strings.FieldsFunc(s, func(r rune) bool { return r == '+' || r == ',' }) {
		e = strings.TrimSpace(e)
		name, kv, ok := strings.Cut(e, ":")
		if !ok {
			return nil, fmt.Errorf("DEC by projection: %q: want name:k_chunk (e.g. down_proj:32)", e)
		}
		name = strings.TrimSpace(name)
		if !slices.Contains(DECProjections, name) {
			return nil, fmt.Errorf("DEC by projection: %q: unknown projection %q; known: %s", e, name, strings.Join(DECProjections, ", "))
		}
		if _, dup := a[name]; dup {
			return nil, fmt.Errorf("DEC by projection: %q: %s given twice", s, name)
		}
		k, err := strconv.Atoi(strings.TrimSpace(kv))
		if err != nil || k < 0 {
			return nil, fmt.Errorf("DEC by projection: %q: want a non-negative k_chunk after %s:", e, name)
		}
		a[name] = k
	}
	if len(a) == 0 {
		return nil, fmt.Errorf("DEC by projection: %q names no projection", s)
	}
	return a, nil
}

// String returns the canonical form ParseDECAlloc reads: the named kinds in
// DECProjections' order, joined by '+' ("v_proj:256+o_proj:64+down_proj:32").
func (a DECAlloc) String() string {
	var parts []string
	for _, p := range DECProjections {
		if k, ok := a[p]; ok {
			parts = append(parts, fmt.Sprintf("%s:%d", p, k))
		}
	}
	return strings.Join(parts, decAllocSep)
}

// On reports whether a gives some projection a non-zero k_chunk.
func (a DECAlloc) On() bool {
	for _, k := range a {
		if k > 0 {
			return true
		}
	}
	return false
}

// Check reports a name a does not know or that cfg's linear layers lack
// (a model without one of Llama's projections), and a negative k_chunk.
func (a DECAlloc) Check(cfg *Config) error {
	shapes, err := LinearShapes(cfg)
	if err != nil {
		return err
	}
	var kinds []string
	for _, s := range shapes {
		kinds = append(kinds, s.Layers...)
	}
	for _, p := range slices.Sorted(maps.Keys(a)) {
		switch {
		case a[p] < 0:
			return fmt.Errorf("model: DEC by projection: %s:%d: want a non-negative k_chunk", p, a[p])
		case !slices.Contains(kinds, p):
			return fmt.Errorf("model: DEC by projection: the model has no %s (its linear layers: %s)", p, strings.Join(kinds, ", "))
		}
	}
	return nil
}

// decByKind returns the DEC choice of every linear weight of specs by
// tensor name: a's k_chunk for its kind (n_tb 0, the backend's default),
// k_chunk 0 for a kind a does not name.
func decByKind(specs []weightSpec, a DECAlloc) map[string]DECChoice {
	out := make(map[string]DECChoice, len(specs))
	for _, s := range specs {
		if !s.linear || len(s.shape) != 2 {
			continue
		}
		_, kind := linearKind(s.name)
		out[s.name] = DECChoice{KChunk: a[kind]}
	}
	return out
}
