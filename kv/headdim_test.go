package kv

import (
	"strings"
	"testing"
)

// testHeadDims are the head dims the kv tests run at: the powers of two,
// Phi-2's 80 and Phi-3-mini's 96 (not multiples of 32 and 64), and 160 and
// 192 (not powers of two above 128).
var testHeadDims = []int{64, 80, 96, 128, 160, 192, 256}

// mmaHeadDims are the head dims the GPU's mma order is defined for: a
// lane's D/2 codes are cut into 16-byte chunks, whole or one short chunk
// (int4 at D = 96 holds 24 bytes: not), which the GPU kernels' head dims
// (64, 128, 256) meet.
var mmaHeadDims = []int{64, 128, 256}

// resolvesAt models Resolve's rules apart from the head dim itself: a
// per-token group smaller than d must divide it, the rotation needs a power
// of two and bw a multiple of PlaneHeadDimAlign.
func resolvesAt(sp Spec, d int) bool {
	fits := func(tf TensorFormat) bool {
		g := tf.Group
		return !tf.Elem.IsInt() || tf.Scaling != PerToken || g == GroupHeadDim || g >= 128 || d%g == 0
	}
	return fits(sp.K) && fits(sp.V) && (!sp.Rotate || d&(d-1) == 0) && (!sp.Planes.On || d%32 == 0)
}

// TestHeadDimRule: HeadDimOK is the multiples of 16 in [64, 256]; a format
// resolves at every one of them unless its own groups, rotation or planes
// do not fit, and those refusals say why.
func TestHeadDimRule(t *testing.T) {
	for d := 0; d <= 512; d++ {
		want := d >= 64 && d <= 256 && d%16 == 0
		if got := HeadDimOK(d); got != want {
			t.Errorf("HeadDimOK(%d) = %v, want %v", d, got, want)
		}
		if got, want := Rotatable(d), d == 1 || d == 2 || d == 4 || d == 8 || d == 16 || d == 32 || d == 64 || d == 128 || d == 256 || d == 512; got != want {
			t.Errorf("Rotatable(%d) = %v, want %v", d, got, want)
		}
		_, err := MustParseSpec("int4").Resolve(d)
		if (err == nil) != want {
			t.Errorf("Resolve(%d) = %v, want ok %v", d, err, want)
		}
		if err != nil && !strings.Contains(err.Error(), HeadDimRule) {
			t.Errorf("Resolve(%d): %v does not name the rule %q", d, err, HeadDimRule)
		}
	}
	for _, c := range []struct {
		spec string
		d    int
		want string // "" resolves; else a substring of the error
	}{
		{"int4:rot", 96, "power-of-two head dim"},
		{"int4:rot", 128, ""},
		{"int4:kt64", 96, "key groups of 64"},
		{"int4:v64", 96, "value groups of 64"},
		{"int4:kt32:v32", 96, ""},
		{"int4:kt32", 80, "key groups of 32"},
		{"int4:ktd:v128", 80, ""},
		{"int8:g32", 80, "value groups of 32"},
		{"int2:kc32:v32", 96, ""},
		{"bw", 96, ""},
		{"bw", 80, "multiple of 32"},
		{"fp16", 80, ""},
		{"int4:kt128:v128", 192, ""}, // 128 does not divide 192: one group per token
		{"int4:kt64:v64", 192, ""},
		{"int4:kt64", 160, "key groups of 64"},
	} {
		f, err := MustParseSpec(c.spec).Resolve(c.d)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s D=%d: %v", c.spec, c.d, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s D=%d: error %v, want one saying %q", c.spec, c.d, err, c.want)
		case err == nil && (f.K.Elem.IsInt() && f.K.Scaling == PerToken && c.d%f.K.Group != 0 || f.V.Elem.IsInt() && c.d%f.V.Group != 0):
			t.Errorf("%s D=%d: groups %d/%d do not divide the head", c.spec, c.d, f.K.Group, f.V.Group)
		}
	}
}

// TestResolvedSpecParses: a format's resolved spec (groups capped, as
// eval and inspect print it) parses back and resolves to the same layouts
// at its head dim: a whole-head group that is no valid size prints as d.
func TestResolvedSpecParses(t *testing.T) {
	for _, s := range []string{"int4", "int2", "int8", "k8v4", "int4:kt128", "int4:ktd:vd", "int4:kt32:v32", "fp16", "int2:g256"} {
		for _, d := range testHeadDims {
			f, err := MustParseSpec(s).Resolve(d)
			if err != nil {
				if resolvesAt(MustParseSpec(s), d) {
					t.Errorf("%s D=%d: %v", s, d, err)
				}
				continue
			}
			back, err := ParseSpec(f.Spec.String())
			if err != nil {
				t.Errorf("%s D=%d: resolved spec %q does not parse: %v", s, d, f.Spec.String(), err)
				continue
			}
			g, err := back.Resolve(d)
			if err != nil || g.K != f.K || g.V != f.V {
				t.Errorf("%s D=%d: %q resolves to %+v / %+v, %v; want %+v / %+v", s, d, f.Spec.String(), g.K, g.V, err, f.K, f.V)
			}
		}
	}
	if got := MustResolve("int4", 96).Spec.String(); got != "int4:kc128:vd:res128" {
		t.Errorf("int4 at D=96 resolves to %q, want int4:kc128:vd:res128", got)
	}
}

// TestDefaultRotationHeadDim: a model's cache of head dim 96 takes every
// default spec unrotated (the Hadamard rotation needs a power of two), and
// rotates the 4- and 2-bit formats at 64, 128 and 256 as before.
func TestDefaultRotationHeadDim(t *testing.T) {
	for _, s := range []string{"fp16", "bf16", "fp8", "int8", "int4", "int2", "k8v4", "k4v2", "int4:kt128", "int2@0=int8"} {
		for _, d := range testHeadDims {
			sp := MustParseSpec(s).WithDefaultRotation(d)
			if want := sp.RotatesByDefault() && Rotatable(d); sp.Rotate != want {
				t.Errorf("%s D=%d: Rotate %v, want %v", s, d, sp.Rotate, want)
			}
			for i := range 8 {
				if _, err := sp.ForLayer(i, 8).Resolve(d); err != nil {
					t.Errorf("%s D=%d layer %d: %v", s, d, i, err)
				}
			}
		}
	}
}
