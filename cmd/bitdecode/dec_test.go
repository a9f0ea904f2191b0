package main

import (
	"strings"
	"testing"
)

// TestParseDECChoices checks --dec-k lists with values by projection: the
// entries of one value joined by '+' or by commas, a repeated name
// starting the next value, the half3 preset, and the errors.
func TestParseDECChoices(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"0,8,tuned:5%", []string{"0", "8", "tuned:5%"}},
		{"down_proj:32,v_proj:256,o_proj:64", []string{"v_proj:256+o_proj:64+down_proj:32"}},
		{"0,down_proj:32,v_proj:256,down_proj:16,v_proj:256,64", []string{"0", "v_proj:256+down_proj:32", "v_proj:256+down_proj:16", "64"}},
		{"down_proj:32+v_proj:256,gate_proj:64", []string{"v_proj:256+gate_proj:64+down_proj:32"}},
		{"down_proj:32+v_proj:256,v_proj:8+o_proj:8", []string{"v_proj:256+down_proj:32", "v_proj:8+o_proj:8"}},
		{"half3,0", []string{"v_proj:256+o_proj:32+gate_proj:32+up_proj:32+down_proj:16", "0"}},
	} {
		got, err := parseDECChoices(tc.in)
		if err != nil {
			t.Fatalf("%q: %v", tc.in, err)
		}
		var s []string
		for _, d := range got {
			s = append(s, d.String())
		}
		if strings.Join(s, " ") != strings.Join(tc.want, " ") {
			t.Errorf("%q: %q, want %q", tc.in, s, tc.want)
		}
	}
	d, err := parseDECChoice("v_proj:0")
	if err != nil || d.on() || d.engine().On() {
		t.Errorf("v_proj:0: %+v %v: want a choice that is off", d, err)
	}
	if d, err := parseDECChoice("v_proj:8"); err != nil || !d.on() || d.engine().ByLayer["v_proj"] != 8 {
		t.Errorf("v_proj:8: %+v %v", d, err)
	}
	for _, tc := range []struct{ in, msg string }{
		{"down_proj:32,vproj:8", "want a non-negative k_chunk"},
		{"mlp_proj:8", "unknown projection \"mlp_proj\""},
		{"v_proj:-3", "non-negative"},
	} {
		if _, err := parseDECChoices(tc.in); err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%q: error %v, want one with %q", tc.in, err, tc.msg)
		}
	}
}

// TestDECShapesPart checks --shapes NxK@LO+N: the part's outputs parsed,
// and one outside the shape refused.
func TestDECShapesPart(t *testing.T) {
	got, err := decShapes("", "6144x4096@5120+1024,4096x4096")
	if err != nil || len(got) != 2 || got[0].N != 6144 || got[0].K != 4096 || got[0].Lo != 5120 || got[0].DECN != 1024 || got[1].DECN != 0 {
		t.Fatalf("decShapes = %+v, %v", got, err)
	}
	for _, bad := range []string{"6144x4096@5500+1024", "6144x4096@5120", "6144x4096@x+8"} {
		if _, err := decShapes("", bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
