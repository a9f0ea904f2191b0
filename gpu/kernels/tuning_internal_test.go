package kernels

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/bitdecode/bitdecode/kv"
)

func lookup(kv map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := kv[k]; return v, ok }
}

func TestParseTuning(t *testing.T) {
	got, err := ParseTuning(lookup(nil))
	if err != nil || got != (Tuning{}) {
		t.Fatalf("ParseTuning of nothing = %+v, %v; want the zero Tuning", got, err)
	}
	got, err = ParseTuning(lookup(map[string]string{
		EnvDecodeMT: "4", EnvDecodeStages: "3", EnvDecodeMinB: "2", EnvDecodeMinSplit: "128", EnvDecodeSplits: "target:528",
		EnvDecodeFuse: "0", EnvDecodeQK8: "0", EnvWGMMAStages: "5", EnvWGMMAMW: "1", EnvWGMMAMinB: "3", EnvWGMMAPad: "0", EnvPlanesMT: "1, 2,4",
		EnvPlanesPrefetch: "1", EnvPlanesMinSplit: "256", EnvPlanesWeights: "5,3, 2", EnvPlanesMinB: "3", EnvPackSlices: "7", EnvPtxasVerbose: "true",
		EnvPlanesSplits: "target:528", EnvPlanesSplitCost: "0", EnvPlanesFuse: "0", EnvPlanesPrefetchM: "0", EnvPlanesPrefetchL: "1",
		EnvDecodePDL: "wait", EnvDecodeMergeFence: "sc", EnvDecodeSeqLean: "0", EnvDecodeOut32: "0", EnvPrefillFA: "0", EnvPrefillStep: "32",
		EnvPrefillMT: "1", EnvPrefillKS: "1", EnvPrefillDequant: "0",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := Tuning{
		Decode: DecodeTuning{MMA: MMATuning{MT: 4, Stages: 3, MinB: 2, QK8: -1, SeqLean: -1}, WGMMA: WGMMATuning{Stages: 5, MW: 1, MinB: 3, NoPad: true},
			MinSplitTokens: 128, TargetCTAs: 528, NoFuse: true, NoOut32: true, NoPrefill: true, PrefillStep: 32, PrefillMT: 1, PrefillKS: 1, NoPrefillDequant: true, PDL: PDLWait, MergeFenceSC: true, Ptxas: os.Stderr},
		Planes: PlanesTuning{MT: [3]int{1, 2, 4}, Prefetch: true, PrefetchMedium: -1, PrefetchLow: 1, MinSplitTokens: 256, Weights: [3]int{5, 3, 2}, MinB: 3,
			TargetCTAs: 528, PositionSplits: true, NoFuse: true, Ptxas: os.Stderr},
		Pack: PackTuning{Slices: 7},
	}
	if got != want {
		t.Errorf("ParseTuning =\n%+v\nwant\n%+v", got, want)
	}
	// Empty is unset; FUSE=1 is the default.
	if got, err := ParseTuning(lookup(map[string]string{EnvDecodeMT: " ", EnvDecodeFuse: "1", EnvWGMMAPad: "1", EnvPtxasVerbose: "0", EnvDecodePDL: "auto", EnvDecodeMergeFence: "rel", EnvDecodeSplits: "auto"})); err != nil || got != (Tuning{}) {
		t.Errorf("empty/default values: %+v, %v", got, err)
	}
	// SPLITS also names how one sequence's one-wave plan is cut.
	for v, want := range map[string]SplitRunMode{"shortest": SplitRunShortest, "largest": SplitRunLargest} {
		if got, err := ParseTuning(lookup(map[string]string{EnvDecodeSplits: v})); err != nil || got != (Tuning{Decode: DecodeTuning{SplitRun: want}}) {
			t.Errorf("%s=%s: %+v, %v; want SplitRun %v", EnvDecodeSplits, v, got, err, want)
		}
	}
	// Every value that used to be ignored silently is an error naming the
	// variable and what it accepts.
	for _, tt := range []struct{ name, value, want string }{
		{EnvDecodeMT, "3", "1, 2, 4 or 8"},
		{EnvDecodeMT, "x", "1, 2, 4 or 8"},
		{EnvDecodeStages, "1", "0, 2, 3 or 4"},
		{EnvDecodeStages, "5", "0, 2, 3 or 4"},
		{EnvDecodeMinB, "0", "1 to 4"},
		{EnvDecodeMinSplit, "8", "a number of tokens of at least 16"},
		{EnvDecodeSplits, "528", "target:N with N a positive number of CTAs, auto, shortest or largest"},
		{EnvDecodeSplits, "target:0", "target:N with N a positive number of CTAs, auto, shortest or largest"},
		{EnvDecodeSplits, "short", "target:N with N a positive number of CTAs, auto, shortest or largest"},
		{EnvDecodeFuse, "no", "1, t, true, 0, f or false"},
		{EnvDecodePDL, "0", "auto, early, wait or off"},
		{EnvDecodeMergeFence, "acq_rel", "rel or sc"},
		{EnvWGMMAStages, "9", "2 to 8"},
		{EnvWGMMAMW, "4", "1 or 2"},
		{EnvWGMMAMinB, "5", "1 to 4"},
		{EnvPlanesMT, "1,2", "H,M,L such as 1,2,4, each 1, 2, 4 or 8"},
		{EnvPlanesMT, "1,2,3", "H,M,L such as 1,2,4, each 1, 2, 4 or 8"},
		{EnvPlanesPrefetch, "2", "1, t, true, 0, f or false"},
		{EnvPlanesPrefetchM, "m", "1, t, true, 0, f or false"},
		{EnvPlanesPrefetchL, "l", "1, t, true, 0, f or false"},
		{EnvPlanesMinSplit, "63", "a number of positions of at least 64"},
		{EnvPlanesWeights, "4,2", "H,M,L such as 4,2,1, each 1 to 64"},
		{EnvPlanesWeights, "4,2,0", "H,M,L such as 4,2,1, each 1 to 64"},
		{EnvPlanesMinB, "5", "1 to 4"},
		{EnvPlanesSplits, "264", "target:N with N a positive number of CTAs"},
		{EnvPlanesSplitCost, "no", "1, t, true, 0, f or false"},
		{EnvPlanesFuse, "off", "1, t, true, 0, f or false"},
		{EnvPackSlices, "33", "1 to 32"},
		{EnvPtxasVerbose, "verbose", "1, t, true, 0, f or false"},
	} {
		_, err := ParseTuning(lookup(map[string]string{tt.name: tt.value}))
		var ve *VarError
		if !errors.As(err, &ve) || ve.Name != tt.name || ve.Want != tt.want || !strings.Contains(err.Error(), tt.name+`="`+tt.value+`"`) {
			t.Errorf("%s=%q: err = %v, want a VarError naming it and %q", tt.name, tt.value, err, tt.want)
		}
	}
}

func TestTuningChecks(t *testing.T) {
	for _, tt := range []struct {
		err   error
		field string
	}{
		{DecodeTuning{MMA: MMATuning{MT: 3}}.check(), "MMATuning.MT"},
		{DecodeTuning{MMA: MMATuning{Stages: 1}}.check(), "MMATuning.Stages"},
		{DecodeTuning{MMA: MMATuning{MinB: 5}}.check(), "MMATuning.MinB"},
		{DecodeTuning{MMA: MMATuning{QK8: 2}}.check(), "MMATuning.QK8"},
		{DecodeTuning{WGMMA: WGMMATuning{Stages: 1}}.check(), "WGMMATuning.Stages"},
		{DecodeTuning{WGMMA: WGMMATuning{MW: 3}}.check(), "WGMMATuning.MW"},
		{DecodeTuning{WGMMA: WGMMATuning{MinB: -1}}.check(), "WGMMATuning.MinB"},
		{DecodeTuning{MinSplitTokens: 8}.check(), "DecodeTuning.MinSplitTokens"},
		{DecodeTuning{TargetCTAs: -1}.check(), "DecodeTuning.TargetCTAs"},
		{DecodeTuning{SplitRun: 3}.check(), "DecodeTuning.SplitRun"},
		{PlanesTuning{MT: [3]int{1, 0, 4}}.check(), "PlanesTuning.MT"},
		{PlanesTuning{MinSplitTokens: 32}.check(), "PlanesTuning.MinSplitTokens"},
		{PlanesTuning{TargetCTAs: -1}.check(), "PlanesTuning.TargetCTAs"},
		{PlanesTuning{Weights: [3]int{4, 65, 1}}.check(), "PlanesTuning.Weights"},
		{PlanesTuning{MinB: 5}.check(), "PlanesTuning.MinB"},
		{PlanesTuning{PrefetchMedium: 2}.check(), "PlanesTuning.PrefetchMedium"},
		{PlanesTuning{PrefetchLow: -2}.check(), "PlanesTuning.PrefetchLow"},
		{PackTuning{Slices: 33}.check(), "PackTuning.Slices"},
	} {
		var ve *VarError
		if !errors.As(tt.err, &ve) || ve.Name != tt.field {
			t.Errorf("%s: check = %v, want a VarError naming it", tt.field, tt.err)
		}
	}
	for _, err := range []error{(DecodeTuning{}).check(), (PlanesTuning{}).check(), (PackTuning{}).check()} {
		if err != nil {
			t.Errorf("the zero tuning fails its check: %v", err)
		}
	}
}

// TestTuningReachesTheConfigs checks that each knob changes what the planner
// builds, and that the zero Tuning builds today's defaults.
func TestTuningReachesTheConfigs(t *testing.T) {
	lay := func(spec string, d int) DecodeLayout {
		l, err := LayoutFor(kv.MustResolve(spec, d).WithOrder(kv.MMA))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	int4, int2 := lay("int4:kt128", 128), lay("int2", 128)
	if mt, st, minB, ctas := mmaConfig(int4, MMATuning{}); mt != 4 || st != 0 || minB != 1 || ctas != 2 {
		t.Errorf("mmaConfig int4 default = %d, %d, %d, %d; want 4, 0, 1, 2", mt, st, minB, ctas)
	}
	if mt, _, minB, ctas := mmaConfig(int2, MMATuning{}); mt != 8 || minB != 1 || ctas != 2 {
		t.Errorf("mmaConfig int2 default = mt %d, minB %d, ctas %d; want 8, 1, 2", mt, minB, ctas)
	}
	if mt, st, minB, ctas := mmaConfig(int4, MMATuning{MT: 2, Stages: 3, MinB: 4}); mt != 2 || st != 3 || minB != 4 || ctas != 4 {
		t.Errorf("mmaConfig int4 tuned = %d, %d, %d, %d; want 2, 3, 4, 4", mt, st, minB, ctas)
	}
	if _, st, _, _ := mmaConfig(lay("int4", 256), MMATuning{Stages: 4}); st != 2 {
		t.Errorf("D=256 stages = %d, want the cap of 2", st)
	}
	// v2.11's ring: int2 D=128 tiles of 4 groups take 2048 + 2048 code bytes,
	// 256 of value pairs and 512 of key pairs; 4 stages of that do not fit
	// 3 CTAs per SM, 3 do.
	if got := mmaRingSlot(int2, 4); got != 4864 {
		t.Errorf("mmaRingSlot int2 MT 4 = %d, want 4864", got)
	}
	if mt, st, minB, ctas := mmaConfig(int2, MMATuning{MT: 4, Stages: 4, MinB: 3}); mt != 4 || st != 3 || minB != 3 || ctas != 3 {
		t.Errorf("mmaConfig int2 ring (4, 4, 3) = %d, %d, %d, %d; want 4, 3, 3, 3", mt, st, minB, ctas)
	}
	if mt, st, _, ctas := mmaConfig(int2, MMATuning{Stages: 3}); mt != 8 || st != 3 || ctas != 2 {
		t.Errorf("mmaConfig int2 ring (3) = mt %d, stages %d, ctas %d; want 8, 3, 2", mt, st, ctas)
	}
	// int8 D=256 tiles of 4 groups: 2 stages take 268 KiB, over one CTA's
	// 227 (call 1's failure): the tile halves.
	if mt, st, _, _ := mmaConfig(lay("int8", 256), MMATuning{MT: 4, Stages: 2, MinB: 3}); mt != 2 || st != 2 || mmaRingSmem(lay("int8", 256), mt, st) > smemPerCTA-mmaStaticSmem {
		t.Errorf("mmaConfig int8 D=256 ring (2, 4, 3) = mt %d, stages %d; want 2, 2", mt, st)
	}
	const h100Shared = 227 << 10
	mw, st, minB, ctas, err := wgmmaConfig(int4, WGMMATuning{}, h100Shared)
	if err != nil || mw != 2 || minB != 3 || ctas != 3 || st < 2 {
		t.Errorf("wgmmaConfig int4 default = %d, %d, %d, %d, %v", mw, st, minB, ctas, err)
	}
	if mw, st, minB, _, err := wgmmaConfig(int4, WGMMATuning{MW: 1, Stages: 2, MinB: 1}, h100Shared); err != nil || mw != 1 || st != 2 || minB != 1 {
		t.Errorf("wgmmaConfig int4 tuned = %d, %d, %d, %v; want 1, 2, 1", mw, st, minB, err)
	}
	if got := planesMT(128, [3]int{}, false, false); got != [3]int{1, 2, 4} {
		t.Errorf("planesMT default at D=128 = %v, want [1 2 4]", got)
	}
	// Formats that read MEDIUM tokens and no LOW ones: LOW tiles of
	// MEDIUM's size (v2.2), at D = 128 only; with LOW reads too, the
	// budget's (v2.9).
	if got := planesMT(128, [3]int{}, true, false); got != [3]int{1, 2, 2} {
		t.Errorf("planesMT with MEDIUM reads at D=128 = %v, want [1 2 2]", got)
	}
	if got := planesMT(128, [3]int{}, true, true); got != [3]int{1, 2, 4} {
		t.Errorf("planesMT with MEDIUM and LOW reads at D=128 = %v, want [1 2 4]", got)
	}
	if got, want := planesMT(64, [3]int{}, true, false), planesMT(64, [3]int{}, false, false); got != want {
		t.Errorf("planesMT with MEDIUM reads at D=64 = %v, want the budget's %v", got, want)
	}
	if got := planesMT(128, [3]int{2, 2, 2}, true, false); got != [3]int{2, 2, 2} {
		t.Errorf("planesMT tuned = %v", got)
	}
	// Tier weights (v2.9): the tile weights for formats that read LOW
	// tokens at D = 128 with LOW tiles of 4, v2.3's elsewhere; LOW's weight
	// is the same in both, so a LOW-only (sequence, KV head) is cut as
	// before.
	for _, tt := range []struct {
		l    PlanesLayout
		mt   [3]int
		want [3]int
	}{
		{PlanesLayout{D: 128, Medium: true, Low: true}, [3]int{1, 2, 4}, planesLowWeights},
		{PlanesLayout{D: 128, Low: true}, [3]int{1, 2, 4}, planesLowWeights},
		{PlanesLayout{D: 128, Medium: true}, [3]int{1, 2, 2}, planesWeights},
		{PlanesLayout{D: 128}, [3]int{1, 2, 4}, planesWeights},
		{PlanesLayout{D: 128, Medium: true, Low: true}, [3]int{1, 2, 2}, planesWeights},
		{PlanesLayout{D: 64, Medium: true, Low: true}, [3]int{2, 4, 8}, planesWeights},
	} {
		if got := planesDefaultWeights(tt.l, tt.mt); got != tt.want {
			t.Errorf("planesDefaultWeights(%+v, %v) = %v, want %v", tt.l, tt.mt, got, tt.want)
		}
	}
	if planesLowWeights[kv.Low] != planesWeights[kv.Low] {
		t.Errorf("LOW weight %d, v2.3's %d: LOW-only splits would move", planesLowWeights[kv.Low], planesWeights[kv.Low])
	}
	// MEDIUM and LOW double buffering (v2.5): off unless asked for.
	for _, tt := range []struct {
		t    PlanesTuning
		want int
	}{
		{PlanesTuning{}, 0}, {PlanesTuning{PrefetchMedium: -1, PrefetchLow: -1}, 0}, {PlanesTuning{PrefetchMedium: 1}, 2},
		{PlanesTuning{PrefetchLow: 1, Prefetch: true}, 5}, {PlanesTuning{PrefetchMedium: 1, PrefetchLow: 1}, 6},
	} {
		if got := planesPrefetch(tt.t); got != tt.want {
			t.Errorf("planesPrefetch(%+v) = %d, want %d", tt.t, got, tt.want)
		}
	}
}
