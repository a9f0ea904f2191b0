package cpufeat

import "testing"

func TestLevels(t *testing.T) {
	d := Detected()
	t.Logf("detected %v (VNNI %v, BF16 %v, VBMI %v, DotProd %v)", d.Max, d.VNNI, d.BF16, d.VBMI, d.DotProd)
	if Active() != d.Max {
		t.Fatalf("Active() = %v before any Force, want the detected %v", Active(), d.Max)
	}
	for l := range Level(NumLevels) {
		got, restore := Force(l)
		// want: l if the chain has it up to the detected level, the
		// detected level if l comes after it, Generic if l is another
		// architecture's.
		want := Generic
		if r := rank(l); r >= 0 {
			want = archLevels[min(r, rank(d.Max))]
		}
		if got != want || Active() != want {
			t.Errorf("Force(%v) = %v, Active() = %v; want %v", l, got, Active(), want)
		}
		if l < AVX512 && (VNNI() || BF16() || VBMI()) {
			t.Errorf("Force(%v): VNNI() = %v, BF16() = %v, VBMI() = %v, want false", l, VNNI(), BF16(), VBMI())
		}
		if DotProd() != (want == NEON && d.DotProd) {
			t.Errorf("Force(%v): DotProd() = %v, want %v", l, DotProd(), want == NEON && d.DotProd)
		}
		if l == AVX512 && d.Max == AVX512 && (VNNI() != d.VNNI || BF16() != d.BF16 || VBMI() != d.VBMI) {
			t.Errorf("Force(AVX512): VNNI() = %v, BF16() = %v, VBMI() = %v, want the detected %v, %v, %v",
				VNNI(), BF16(), VBMI(), d.VNNI, d.BF16, d.VBMI)
		}
		restore()
		if Active() != d.Max {
			t.Fatalf("restore after Force(%v): Active() = %v, want %v", l, Active(), d.Max)
		}
	}
	if ls := Levels(); ls[0] != Generic || ls[len(ls)-1] != d.Max {
		t.Errorf("Levels() = %v, want Generic..%v", ls, d.Max)
	}
	if rank(d.Max) < 0 {
		t.Errorf("detected level %v is not in this build's chain %v", d.Max, archLevels)
	}
}

func TestParseLevel(t *testing.T) {
	for l := range Level(NumLevels) {
		got, err := ParseLevel(l.String())
		if err != nil || got != l {
			t.Errorf("ParseLevel(%q) = %v, %v; want %v", l.String(), got, err, l)
		}
	}
	if _, err := ParseLevel("sse2"); err == nil {
		t.Error("ParseLevel(\"sse2\") gave no error")
	}
}
