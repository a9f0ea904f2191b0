package kv

import (
	"errors"
	"reflect"
	"testing"
)

// TestPerLayerSpec checks the per-layer grammar: which layer gets which
// format, the round trip through String, the shared residual block and the
// errors.
func TestPerLayerSpec(t *testing.T) {
	sp, err := ParseSpec("int2@0..1+-2..-1=int8@-1=fp16")
	if err != nil {
		t.Fatal(err)
	}
	const n = 6
	want := []string{"int8:kc128:v128:res256", "int8:kc128:v128:res256", "int2:kc128:v128:res256", "int2:kc128:v128:res256",
		"int8:kc128:v128:res256", "fp16:res256"}
	for i, w := range want {
		if got := sp.ForLayer(i, n).String(); got != w {
			t.Errorf("layer %d: %s, want %s", i, got, w)
		}
	}
	if err := sp.CheckLayers(n); err != nil {
		t.Error(err)
	}
	if err := sp.CheckLayers(1); err == nil {
		t.Error("layers 0..1 accepted for a one-layer model")
	}
	back, err := ParseSpec(sp.String())
	if err != nil || !reflect.DeepEqual(back, sp) {
		t.Errorf("round trip of %q: %+v, %v", sp.String(), back, err)
	}
	if !sp.PerLayer() || MustParseSpec("int4").PerLayer() {
		t.Error("PerLayer")
	}
	for _, bad := range []string{"int4@", "int4@0", "int4@x=int8", "int4@0..=int8", "int4@0=bw", "bw@0=int8", "int4@0=int8:res256", "int4@0=nope",
		"int2@0=int4:kc256"} {
		_, err := ParseSpec(bad)
		var se *SpecError
		if !errors.As(err, &se) || se.Spec == "" {
			t.Errorf("ParseSpec(%q) = %v, want a SpecError", bad, err)
		}
	}
	// A layer that names the base's residual explicitly is fine.
	if _, err := ParseSpec("int4@0=int8:res128"); err != nil {
		t.Error(err)
	}
}
