package cpufeat

import "testing"

func TestLevels(t *testing.T) {
	d := Detected()
	t.Logf("detected %v (VNNI %v, BF16 %v)", d.Max, d.VNNI, d.BF16)
	if Active() != d.Max {
		t.Fatalf("Active() = %v before any Force, want the detected %v", Active(), d.Max)
	}
	for _, l := range []Level{Generic, AVX2, AVX512} {
		got, restore := Force(l)
		if want := min(l, d.Max); got != want || Active() != want {
			t.Errorf("Force(%v) = %v, Active() = %v; want %v", l, got, Active(), want)
		}
		if l == Generic && (VNNI() || BF16()) {
			t.Errorf("Force(Generic): VNNI() = %v, BF16() = %v, want false", VNNI(), BF16())
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
