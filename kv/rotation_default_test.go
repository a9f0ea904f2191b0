package kv

import (
	"testing"
)

// TestDefaultRotation: ParseSpec leaves a spec as written; WithDefaultRotation
// rotates the 4- and 2-bit formats (base and per-layer) unless they say
// norot, never int8, fp16 or bw; String round-trips rot and norot.
func TestDefaultRotation(t *testing.T) {
	for _, c := range []struct{ in, parsed, model string }{
		{"int4", "int4:kc128:v128:res128", "int4:kc128:v128:res128:rot"},
		{"int4:norot", "int4:kc128:v128:res128:norot", "int4:kc128:v128:res128:norot"},
		{"int4:rot", "int4:kc128:v128:res128:rot", "int4:kc128:v128:res128:rot"},
		{"int8", "int8:kc128:v128:res128", "int8:kc128:v128:res128"},
		{"k8v4", "k8v4:kc128:v128:res128", "k8v4:kc128:v128:res128:rot"},
		{"fp16", "fp16:res128", "fp16:res128"},
		{"int2@0=int8@5=int4:norot", "int2:kc128:v128:res256@0=int8:kc128:v128:res256@5=int4:kc128:v128:res256:norot",
			"int2:kc128:v128:res256:rot@0=int8:kc128:v128:res256@5=int4:kc128:v128:res256:norot"},
	} {
		sp, err := ParseSpec(c.in)
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		if got := sp.String(); got != c.parsed {
			t.Errorf("ParseSpec(%q) = %q, want %q", c.in, got, c.parsed)
		}
		m := sp.WithDefaultRotation(128)
		if got := m.String(); got != c.model {
			t.Errorf("ParseSpec(%q).WithDefaultRotation() = %q, want %q", c.in, got, c.model)
		}
		again, err := ParseSpec(m.String())
		if err != nil || again.String() != m.String() {
			t.Errorf("%q does not round-trip: %q, %v", m.String(), again.String(), err)
		}
	}
	if sp := MustParseSpec("bw").WithDefaultRotation(128); sp.Rotate {
		t.Error("bw rotated by default")
	}
	for _, bad := range []string{"int4:rot:norot", "int4:norot:rot", "int4:norot2"} {
		if _, err := ParseSpec(bad); err == nil {
			t.Errorf("ParseSpec(%q) = %v, want an error", bad, err)
		}
	}
}
