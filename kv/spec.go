package kv

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Elem is the element type a K or V tensor is stored in.
type Elem uint8

// The element types. Integer types are quantized with per-group fp16 scale and
// zero; float types are converted element by element.
const (
	FP16 Elem = iota + 1
	BF16
	FP8E4M3
	FP8E5M2
	Int8
	Int4
	Int2
)

var elemNames = map[Elem]string{
	FP16: "fp16", BF16: "bf16", FP8E4M3: "fp8e4m3", FP8E5M2: "fp8e5m2",
	Int8: "int8", Int4: "int4", Int2: "int2",
}

// elemAliases maps every accepted spelling to its element type.
var elemAliases = map[string]Elem{
	"fp16": FP16, "f16": FP16, "half": FP16,
	"bf16":    BF16,
	"fp8e4m3": FP8E4M3, "fp8": FP8E4M3, "e4m3": FP8E4M3,
	"fp8e5m2": FP8E5M2, "e5m2": FP8E5M2,
	"int8": Int8, "int4": Int4, "int2": Int2,
}

// widthElem maps the widths of the "kXvY" form to element types.
var widthElem = map[string]Elem{"16": FP16, "8": Int8, "4": Int4, "2": Int2}

// String returns the canonical name of e ("int4", "fp8e4m3", ...).
func (e Elem) String() string {
	if s, ok := elemNames[e]; ok {
		return s
	}
	return fmt.Sprintf("Elem(%d)", uint8(e))
}

// Bits returns the number of bits of one stored element.
func (e Elem) Bits() int {
	switch e {
	case FP16, BF16:
		return 16
	case FP8E4M3, FP8E5M2, Int8:
		return 8
	case Int4:
		return 4
	case Int2:
		return 2
	}
	return 0
}

// IsInt reports whether e is quantized with scales and zeros.
func (e Elem) IsInt() bool { return e == Int8 || e == Int4 || e == Int2 }

// Levels returns 2^bits - 1, the largest code of an integer type.
func (e Elem) Levels() int { return 1<<e.Bits() - 1 }

// Scaling says along which axis an integer tensor's groups run.
type Scaling uint8

const (
	// PerToken groups G consecutive channels of one token ("kt" for keys; values always).
	PerToken Scaling = iota + 1
	// PerChannel groups G consecutive tokens of one channel ("kc", keys only).
	PerChannel
)

// String returns "kt" or "kc".
func (s Scaling) String() string {
	switch s {
	case PerToken:
		return "kt"
	case PerChannel:
		return "kc"
	}
	return fmt.Sprintf("Scaling(%d)", uint8(s))
}

// GroupHeadDim is the group size that means "the whole head dimension" (one
// group per token), written "d" in a spec.
const GroupHeadDim = 0

// DefaultGroup is the group size used when a spec names none.
const DefaultGroup = 128

// Residual block sizes: defaults follow the decode kernel's tile (BitDecoding
// eq. 1: 128 tokens for int4, 256 for int2), limits keep blocks tile-aligned.
const (
	DefaultResidual     = 128
	DefaultResidualInt2 = 256
	ResidualAlign       = 32
	MaxResidual         = 1024
)

// ValidGroups lists the group sizes a spec accepts (GroupHeadDim aside).
var ValidGroups = []int{32, 64, 128, 256}

// TensorFormat is the storage format of K or of V.
type TensorFormat struct {
	Elem Elem
	// Scaling is PerChannel or PerToken for integer keys, PerToken for
	// integer values, zero for float types.
	Scaling Scaling
	// Group is the group size G (tokens for PerChannel, channels for
	// PerToken) or GroupHeadDim; zero for float types.
	Group int
}

// String returns the format as a spec fragment, e.g. "int4/kc128".
func (f TensorFormat) String() string {
	if !f.Elem.IsInt() {
		return f.Elem.String()
	}
	g := "d"
	if f.Group != GroupHeadDim {
		g = strconv.Itoa(f.Group)
	}
	return f.Elem.String() + "/" + f.Scaling.String() + g
}

// Spec is a parsed KV cache format: the formats of K and V, the residual
// block size and whether K and V are Hadamard-rotated before they are stored.
type Spec struct {
	K, V TensorFormat
	// Residual is Nr, the number of newest tokens kept in fp16 before a block
	// is packed; every packed block holds exactly Nr tokens.
	Residual int
	// Rotate applies an orthonormal Walsh-Hadamard transform to K and V
	// (and to Q, and back to the output) so outlier channels are spread
	// before quantization. Scores and outputs are unchanged in exact arithmetic.
	// ParseSpec sets it for "rot" only; WithDefaultRotation turns it on for
	// the formats that rotate by default, as a model's cache does.
	Rotate bool
	// NoRotate records "norot": the format stays unrotated where it would
	// rotate by default.
	NoRotate bool
	// Planes is set for the bit-plane format "bw" (K and V fp16 or bf16,
	// Residual the tokens per block); zero for every other format.
	Planes PlaneSpec
	// Layers give some layers their own format (later entries win); the
	// others take this spec's. Every layer's Residual is this spec's.
	Layers []LayerFormat
	// Reference makes the format a CPU-only accuracy reference: each
	// block is quantized as the spec says, but with float32 scales and
	// zeros (not rounded to fp16) and stored dequantized as fp16 values, so
	// that eval can tell what the format costs apart from what its 16-bit
	// parameters cost. The GPU caches refuse it.
	Reference bool
}

// LayerFormat is a per-layer override of a spec: the format of some layers.
type LayerFormat struct {
	Layers []LayerRange
	Spec   Spec // without Layers of its own
}

// LayerRange is the layers From..To, inclusive; a negative index counts
// from the end (-1 is the last layer).
type LayerRange struct{ From, To int }

// parseLayerRange parses "N" or "A..B" (indexes may be negative).
func parseLayerRange(r string) (LayerRange, error) {
	a, b, isRange := strings.Cut(r, "..")
	from, err1 := strconv.Atoi(a)
	to, err2 := from, error(nil)
	if isRange {
		to, err2 = strconv.Atoi(b)
	}
	if err1 != nil || err2 != nil {
		return LayerRange{}, fmt.Errorf("layers %q: want N or A..B (negative counts from the last layer, -1)", r)
	}
	return LayerRange{From: from, To: to}, nil
}

// abs returns the range's layers for a model of n layers.
func (r LayerRange) abs(n int) (from, to int) {
	from, to = r.From, r.To
	if from < 0 {
		from += n
	}
	if to < 0 {
		to += n
	}
	return from, to
}

func (r LayerRange) String() string {
	if r.From == r.To {
		return strconv.Itoa(r.From)
	}
	return fmt.Sprintf("%d..%d", r.From, r.To)
}

// CheckLayers returns an error if a per-layer range does not name layers of
// a model of n layers.
func (s Spec) CheckLayers(n int) error {
	for _, lf := range s.Layers {
		for _, r := range lf.Layers {
			if from, to := r.abs(n); from < 0 || to >= n || from > to {
				return &SpecError{Spec: s.String(), Field: "@" + r.String(), Err: fmt.Errorf("layers %v of a model of %d layers", r, n)}
			}
		}
	}
	return nil
}

// ForLayer returns the spec of layer i of a model of n layers: the last
// per-layer format that names it, else s itself (without Layers).
func (s Spec) ForLayer(i, n int) Spec {
	out := s
	out.Layers = nil
	for _, lf := range s.Layers {
		for _, r := range lf.Layers {
			if from, to := r.abs(n); i >= from && i <= to {
				out = lf.Spec
			}
		}
	}
	return out
}

// PerLayer reports whether the spec gives some layers their own format.
func (s Spec) PerLayer() bool { return len(s.Layers) > 0 }

// SpecGrammar documents what ParseSpec accepts; the CLI prints it.
const SpecGrammar = `KV format spec:  BASE[:OPTION]...

BASE     fp16 | bf16 | fp8e4m3 (fp8) | fp8e5m2 | int8 | int4 | int2
             the same type for K and V
         kXvY    K and V widths apart, X,Y in 16 (fp16), 8, 4, 2 (int): k8v4, k4v2
OPTION   kc[G]   keys per channel, groups of G tokens (default for integer K, G=128)
         kt[G]   keys per token, groups of G channels (G=d: the whole head)
         v[G]    values per token, groups of G channels (default 128)
         g[G]    the same G for keys and values
         resN    residual block of N fp16 tokens (multiple of 32, <= 1024;
                 default 128, 256 when K or V is int2)
         rot     Hadamard-rotate K and V (and Q, and the output back) before
                 quantization; a model's cache does it by default when K or V
                 has 4 or 2 bits (measured better on every such format,
                 docs/kv-accuracy.md)
         norot   no rotation (turns the default off)
         ref     accuracy reference (CPU only): quantize with float32 scales
                 and zeros, store the dequantized values in fp16
G        32 | 64 | 128 | 256 | d (head dim); capped at the head dim; a
         channel group of 128 or 256 that does not divide the head dim
         spans the whole head, a smaller one must divide it

examples: int4   k8v4   int4:kt64   int2:kc32:res256   fp8e4m3   k4v2:rot

Per-layer formats: SPEC@LAYERS=SPEC[@LAYERS=SPEC]...  LAYERS is N or A..B
joined by +, negative from the end (-1 is the last layer); later ones win;
every layer keeps the base's residual block. Example: int2@0..1+-2..-1=int8
(int2, the first two and last two layers int8).

` + PlaneGrammar

// SpecError reports a spec that cannot be parsed, in the manner of
// strconv.NumError: the whole spec, the part at fault and why.
type SpecError struct {
	Spec  string // the spec as given
	Field string // the part that is wrong ("" when the spec is empty)
	Err   error  // the reason
}

func (e *SpecError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("kv: invalid format spec %q: %v", e.Spec, e.Err)
	}
	return fmt.Sprintf("kv: invalid format spec %q at %q: %v", e.Spec, e.Field, e.Err)
}

// Unwrap returns the reason.
func (e *SpecError) Unwrap() error { return e.Err }

// ErrSpec is the reason behind every SpecError whose cause is an unknown word.
var ErrSpec = errors.New("unknown word")

// validBases lists the base names for error messages.
const validBases = "fp16, bf16, fp8e4m3, fp8e5m2, int8, int4, int2, kXvY with X,Y in 16/8/4/2 (e.g. k8v4), or bw"

// ParseSpec parses a format spec (see SpecGrammar). Group sizes larger than
// the head dimension are capped when the spec is resolved for a head dim.
func ParseSpec(s string) (Spec, error) {
	parts := strings.Split(strings.TrimSpace(s), "@")
	sp, err := parseOne(s, parts[0])
	if err != nil || len(parts) == 1 {
		return sp, err
	}
	fail := func(field string, err error) (Spec, error) {
		return Spec{}, &SpecError{Spec: s, Field: field, Err: err}
	}
	if sp.Planes.On {
		return fail("@"+parts[1], errors.New("the bit-plane format (bw) takes no per-layer formats"))
	}
	for _, p := range parts[1:] {
		ranges, sub, ok := strings.Cut(p, "=")
		if !ok || ranges == "" || sub == "" {
			return fail("@"+p, errors.New("a per-layer format is @LAYERS=SPEC, e.g. @0..1=int8"))
		}
		lf := LayerFormat{}
		for _, r := range strings.Split(ranges, "+") {
			lr, err := parseLayerRange(r)
			if err != nil {
				return fail("@"+p, err)
			}
			lf.Layers = append(lf.Layers, lr)
		}
		o, err := parseOne(s, sub)
		if err != nil {
			return o, err
		}
		if o.Planes.On {
			return fail("@"+p, errors.New("a layer cannot take the bit-plane format (bw)"))
		}
		// Every layer packs blocks of the same Nr tokens (the caches keep one
		// block table for all layers).
		if o.Residual != sp.Residual && strings.Contains(strings.ToLower(sub), ":res") {
			return fail("@"+p, fmt.Errorf("a layer's residual block must be the base's (res%d): every layer packs blocks of the same tokens", sp.Residual))
		}
		o.Residual = sp.Residual
		if o.K.Scaling == PerChannel && o.Residual%o.K.Group != 0 {
			return fail("@"+p, fmt.Errorf("the residual block of %d tokens must hold whole key groups of %d tokens", o.Residual, o.K.Group))
		}
		lf.Spec = o
		sp.Layers = append(sp.Layers, lf)
	}
	return sp, nil
}

// parseOne parses one format spec without per-layer formats; all is the
// whole spec, for errors.
func parseOne(all, s string) (Spec, error) {
	fail := func(field string, err error) (Spec, error) {
		return Spec{}, &SpecError{Spec: all, Field: field, Err: err}
	}
	parts := strings.Split(strings.ToLower(strings.TrimSpace(s)), ":")
	if parts[0] == "" {
		return fail("", fmt.Errorf("empty spec; want %s", validBases))
	}
	var sp Spec
	base := parts[0]
	if base == "bw" {
		return parsePlaneSpec(s, parts[1:])
	}
	if e, ok := elemAliases[base]; ok {
		sp.K.Elem, sp.V.Elem = e, e
	} else if kw, vw, ok := splitKV(base); ok {
		ke, okK := widthElem[kw]
		ve, okV := widthElem[vw]
		if !okK || !okV {
			return fail(base, fmt.Errorf("%w: widths must be 16, 8, 4 or 2", ErrSpec))
		}
		sp.K.Elem, sp.V.Elem = ke, ve
	} else {
		return fail(base, fmt.Errorf("%w: want %s", ErrSpec, validBases))
	}
	if sp.K.Elem.IsInt() {
		sp.K.Scaling, sp.K.Group = PerChannel, DefaultGroup
	}
	if sp.V.Elem.IsInt() {
		sp.V.Scaling, sp.V.Group = PerToken, DefaultGroup
	}
	sp.Residual = DefaultResidual
	if sp.K.Elem == Int2 || sp.V.Elem == Int2 {
		sp.Residual = DefaultResidualInt2
	}
	seen := map[string]bool{}
	for _, opt := range parts[1:] {
		key := strings.TrimRight(opt, "0123456789d")
		if key == "" || key == "res" && strings.HasSuffix(opt, "d") {
			return fail(opt, fmt.Errorf("%w: want kc[G], kt[G], v[G], g[G], resN, rot, norot or ref", ErrSpec))
		}
		if seen[key] || (key == "kc" && seen["kt"]) || (key == "kt" && seen["kc"]) || (key == "rot" && seen["norot"]) || (key == "norot" && seen["rot"]) {
			return fail(opt, errors.New("given twice"))
		}
		seen[key] = true
		arg := opt[len(key):]
		switch key {
		case "kc", "kt":
			if !sp.K.Elem.IsInt() {
				return fail(opt, fmt.Errorf("keys are %v; kc/kt apply to integer keys only", sp.K.Elem))
			}
			sp.K.Scaling = PerChannel
			if key == "kt" {
				sp.K.Scaling = PerToken
			}
			if arg != "" {
				g, err := parseGroup(arg, key == "kt")
				if err != nil {
					return fail(opt, err)
				}
				sp.K.Group = g
			}
		case "v", "g":
			g, err := parseGroup(arg, true)
			if err != nil {
				return fail(opt, err)
			}
			if key == "v" && !sp.V.Elem.IsInt() {
				return fail(opt, fmt.Errorf("values are %v; v[G] applies to integer values only", sp.V.Elem))
			}
			if key == "g" {
				if !sp.K.Elem.IsInt() && !sp.V.Elem.IsInt() {
					return fail(opt, fmt.Errorf("%v has no groups", sp.K.Elem))
				}
				if sp.K.Elem.IsInt() {
					if g == GroupHeadDim && sp.K.Scaling == PerChannel {
						return fail(opt, errors.New("per-channel keys group tokens; G=d applies to kt"))
					}
					sp.K.Group = g
				}
			}
			if sp.V.Elem.IsInt() {
				sp.V.Group = g
			}
		case "res":
			n, err := strconv.Atoi(arg)
			if err != nil || n < ResidualAlign || n > MaxResidual || n%ResidualAlign != 0 {
				return fail(opt, fmt.Errorf("residual must be a multiple of %d in [%d, %d]", ResidualAlign, ResidualAlign, MaxResidual))
			}
			sp.Residual = n
		case "rot":
			if arg != "" {
				return fail(opt, fmt.Errorf("%w: rot takes no argument", ErrSpec))
			}
			sp.Rotate = true
		case "norot":
			if arg != "" {
				return fail(opt, fmt.Errorf("%w: norot takes no argument", ErrSpec))
			}
			sp.NoRotate = true
		case "ref":
			if arg != "" {
				return fail(opt, fmt.Errorf("%w: ref takes no argument", ErrSpec))
			}
			if !sp.K.Elem.IsInt() && !sp.V.Elem.IsInt() {
				return fail(opt, errors.New("ref simulates an integer format; this one has none"))
			}
			sp.Reference = true
		default:
			return fail(opt, fmt.Errorf("%w: want kc[G], kt[G], v[G], g[G], resN, rot, norot or ref", ErrSpec))
		}
	}

	if sp.K.Scaling == PerChannel && sp.K.Group == GroupHeadDim {
		return fail("kc", errors.New("per-channel keys group tokens; G=d applies to kt"))
	}
	if sp.K.Scaling == PerChannel && sp.Residual%sp.K.Group != 0 {
		return fail(fmt.Sprintf("res%d", sp.Residual), fmt.Errorf("the residual block must hold whole key groups of %d tokens", sp.K.Group))
	}
	return sp, nil
}

// RotatesByDefault reports whether a model's cache rotates the format unless
// its spec says norot (WithDefaultRotation): when K or V is a 4- or 2-bit
// integer. Rotation spreads
// outlier channels before quantization; on the reference checkpoint it
// lowered the perplexity cost of every such format (int4 KC128 +0.79% to
// +0.73%, int4 KT128 +1.77% to +1.14%, int2 +28.0% to +23.3%, k4v2 +8.45% to
// +8.11%; docs/kv-accuracy.md) and changed nothing measurable for int8,
// which stays unrotated.
func (s Spec) RotatesByDefault() bool {
	low := func(e Elem) bool { return e == Int4 || e == Int2 }
	return !s.Planes.On && (low(s.K.Elem) || low(s.V.Elem))
}

// WithDefaultRotation returns s with the rotation turned on where it is the
// default (RotatesByDefault) and the spec did not say norot, for the base
// format and every per-layer one, for a model of head dim d: where d is not
// a power of two (Rotatable) the rotation does not apply and the spec is
// left as written (an explicit rot is then refused by Resolve). The engine
// applies it to the spec a user gives for a model's cache; ParseSpec alone
// leaves a spec as written, so that kernels and benchmarks see exactly the
// format named.
func (s Spec) WithDefaultRotation(d int) Spec {
	fix := func(sp Spec) Spec {
		if !sp.Rotate && !sp.NoRotate && sp.RotatesByDefault() && Rotatable(d) {
			sp.Rotate = true
		}
		return sp
	}
	out := fix(s)
	if len(s.Layers) > 0 {
		out.Layers = make([]LayerFormat, len(s.Layers))
		for i, lf := range s.Layers {
			out.Layers[i] = LayerFormat{Layers: lf.Layers, Spec: fix(lf.Spec)}
		}
	}
	return out
}

// MustParseSpec is ParseSpec for specs known to be valid; it panics otherwise.
func MustParseSpec(s string) Spec {
	sp, err := ParseSpec(s)
	if err != nil {
		panic(err)
	}
	return sp
}

func splitKV(s string) (k, v string, ok bool) {
	if !strings.HasPrefix(s, "k") {
		return "", "", false
	}
	i := strings.Index(s, "v")
	if i < 2 || i == len(s)-1 {
		return "", "", false
	}
	return s[1:i], s[i+1:], true
}

func parseGroup(arg string, allowHeadDim bool) (int, error) {
	if arg == "d" {
		if !allowHeadDim {
			return 0, errors.New("per-channel keys group tokens; G=d applies to kt")
		}
		return GroupHeadDim, nil
	}
	g, err := strconv.Atoi(arg)
	if err == nil {
		for _, v := range ValidGroups {
			if g == v {
				return g, nil
			}
		}
	}
	return 0, fmt.Errorf("group size %q: want one of %v or d", arg, ValidGroups)
}

// String returns the canonical spelling of the spec, which ParseSpec parses
// back to the same Spec.
func (s Spec) String() string {
	if s.Planes.On {
		return s.planeString()
	}
	var b strings.Builder
	if s.K.Elem == s.V.Elem {
		b.WriteString(s.K.Elem.String())
	} else {
		fmt.Fprintf(&b, "k%dv%d", s.K.Elem.Bits(), s.V.Elem.Bits())
	}
	grp := func(g int) string {
		if g == GroupHeadDim {
			return "d"
		}
		return strconv.Itoa(g)
	}
	if s.K.Elem.IsInt() {
		fmt.Fprintf(&b, ":%v%s", s.K.Scaling, grp(s.K.Group))
	}
	if s.V.Elem.IsInt() {
		fmt.Fprintf(&b, ":v%s", grp(s.V.Group))
	}
	fmt.Fprintf(&b, ":res%d", s.Residual)
	switch {
	case s.Rotate:
		b.WriteString(":rot")
	case s.NoRotate:
		b.WriteString(":norot")
	}
	if s.Reference {
		b.WriteString(":ref")
	}
	for _, lf := range s.Layers {
		b.WriteString("@")
		for i, r := range lf.Layers {
			if i > 0 {
				b.WriteString("+")
			}
			b.WriteString(r.String())
		}
		b.WriteString("=" + lf.Spec.String())
	}
	return b.String()
}
