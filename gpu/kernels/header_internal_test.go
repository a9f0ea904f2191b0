package kernels

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/kv"
)

// TestHeaderConstantsMatchGo checks the constants bitdecode.cuh (and
// decode_mma.cu, kTLFirst) shares with the Go planners and the timeline's
// reader: a change on one side only fails here, not on the GPU.
func TestHeaderConstantsMatchGo(t *testing.T) {
	for _, c := range []struct {
		name string
		gos  []int
		file string // "decode_mma.cu", or "": bitdecode.cuh
	}{
		{"kQueryRows", []int{mmaRows, planesRows}, ""},
		{"kFragTokens", []int{PlanesGroup, wgmmaTileTokens / 4}, ""},
		{"kMaxSplits", []int{decodeMaxSplits, planesMaxSplits}, ""},
		{"kFuseMaxSplits", []int{decodeFuseMaxSplits}, ""},
		{"kMergeThreads", []int{decodeThreads, planesThreads, wgmmaThreads - 32}, ""},
		{"kRotWarps", []int{rotWarps}, ""},
		{"kTLHead", []int{timelineHead}, ""},
		{"kTLWords", []int{timelineWords}, ""},
		{"kTLEntry", []int{tlEntry}, ""},
		{"kTLInfo", []int{tlInfo}, ""},
		{"kTLPrologue", []int{tlPrologue}, ""},
		{"kTLLoop", []int{tlLoop}, ""},
		{"kTLWarpsDone", []int{tlWarpsDone}, ""},
		{"kTLPartial", []int{tlPartial}, ""},
		{"kTLArrived", []int{tlArrived}, ""},
		{"kTLExit", []int{tlExit}, ""},
		{"kTLLast", []int{tlLast}, ""},
		{"kTLMarks", []int{tlMarks}, ""},
		{"kTLLens", []int{tlLens}, ""},
		{"kTLQuery", []int{tlQuery}, ""},
		{"kMarkReleased", []int{markReleased}, ""},
		{"kMarkWeights", []int{markWeights}, ""},
		{"kMarkMerged", []int{markMerged}, ""},
		{"kTLFirst", []int{tlFirst}, "decode_mma.cu"},
	} {
		src, file := headerSource, headerName
		if c.file != "" {
			src, file = decodeMMASource, c.file
		}
		m := regexp.MustCompile(`constexpr int ` + c.name + ` = (\d+);`).FindStringSubmatch(src)
		if m == nil {
			t.Errorf("%s has no constexpr int %s", file, c.name)
			continue
		}
		v, _ := strconv.Atoi(m[1])
		for _, g := range c.gos {
			if g != v {
				t.Errorf("%s %s = %d, a Go mirror is %d", file, c.name, v, g)
			}
		}
	}
}

// kernelPrograms returns one program of every kernel family, as the Go
// wrappers build them.
func kernelPrograms(t *testing.T) []cuda.Program {
	l, err := LayoutFor(kv.MustResolve("int4", 128).WithOrder(kv.MMA))
	if err != nil {
		t.Fatal(err)
	}
	pl, err := PlanesLayoutFor(kv.MustResolve("bw", 128))
	if err != nil {
		t.Fatal(err)
	}
	mma, _, _ := mmaProgram(l, 4, 0, 1, false, false, false)
	wg, _, _ := wgmmaProgram(l, 2, 3, 3)
	v1, _, _ := v1Program(l, 8)
	planes, _, _, _ := planesProgram(PlanesMMA, pl, planesRows, planesMT(128, [3]int{}, false, false), 0, planesMinB)
	pack, _, _ := packProgram(128, l)
	return []cuda.Program{mma, wg, v1, planes, pack, program("ops.cu", opsSource, nil, nil), program("gemv.cu", gemvSource, nil, nil),
		program("gemvq.cu", gemvqSource, nil, nil), gemvq3Program(nil, nil), gemvqDECProgram(nil), program("dec.cu", decSource, nil, nil),
		program("kvcache.cu", kvcacheSource, nil, nil), program("gemmq.cu", gemmqSource, nil, nil, cuda.Header{Name: "gemvq.cu", Source: gemvqSource}),
		program("prefill.cu", prefillSource, nil, nil)}
}

// TestProgramsShareTheHeader checks that every kernel family's program is
// compiled with bitdecode.cuh, that its source includes it (no program is
// made by pasting sources together), and that no .cu file defines again a
// name the header defines.
func TestProgramsShareTheHeader(t *testing.T) {
	defs := regexp.MustCompile(`(?m)^(?:BD_DEVICE [\w:<>, ]+? |struct |constexpr \w+ |__global__ void __launch_bounds__\(\w+\) )(\w+)`)
	var names []string
	for _, m := range defs.FindAllStringSubmatch(headerSource, -1) {
		names = append(names, m[1])
	}
	if len(names) < 30 {
		t.Fatalf("found only %d definitions in bitdecode.cuh: %v", len(names), names)
	}
	sources := map[string]string{}
	for _, p := range kernelPrograms(t) {
		if len(p.Headers) == 0 || p.Headers[0].Name != headerName || p.Headers[0].Source != headerSource {
			t.Errorf("%s: the first header is not %s", p.Name, headerName)
		}
		sources[p.Name] = p.Source
		for _, h := range p.Headers[1:] {
			sources[h.Name] = h.Source
		}
	}
	for name, src := range sources {
		if !strings.Contains(src, `#include "`+headerName+`"`) {
			t.Errorf("%s does not include %s", name, headerName)
		}
		for _, n := range names {
			re := regexp.MustCompile(`(?m)^(?:__device__ __forceinline__|BD_DEVICE|struct|constexpr|__global__)[^;{(=]*\b` + n + `\s*[({=<]`)
			if loc := re.FindStringIndex(src); loc != nil {
				t.Errorf("%s defines %s again (bitdecode.cuh has it): %q", name, n, src[loc[0]:loc[1]])
			}
		}
	}
}
