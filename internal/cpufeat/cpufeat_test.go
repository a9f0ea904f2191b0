package cpufeat

import "testing"

func TestLevels(t *testing.T) {
	d := Detected()
	t.Logf("detected %v (VNNI %v, BF16 %v, VBMI %v)", d.Max, d.VNNI, d.BF16, d.VBMI)
	if Active() != d.Max {
		t.Fatalf("Active() = %v before any Force, want the detected %v", Active(), d.Max)
	}
	for _, l := range []Level{Generic, AVX2, AVX512} {
		got, restore := Force(l)
		if want := min(l, d.Max); got != want || Active() != want {
			t.Errorf("Force(%v) = %v, Active() = %v; want %v", l, got, Active(), want)
		}
		if l < AVX512 && (VNNI() || BF16() || VBMI()) {
			t.Errorf("Force(%v): VNNI() = %v, BF16() = %v, VBMI() = %v, want false", l, VNNI(), BF16(), VBMI())
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
}

func TestParseLevel(t *testing.T) {
	for _, l := range []Level{Generic, AVX2, AVX512} {
		got, err := ParseLevel(l.String())
		if err != nil || got != l {
			t.Errorf("ParseLevel(%q) = %v, %v; want %v", l.String(), got, err, l)
		}
	}
	if _, err := ParseLevel("sse2"); err == nil {
		t.Error("ParseLevel(\"sse2\") gave no error")
	}
}
