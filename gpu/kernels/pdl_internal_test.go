package kernels

import (
	"regexp"
	"strings"
	"testing"
)

// gridDependentSources maps each program of gridDependent to its source.
var gridDependentSources = map[string]string{"ops.cu": opsSource, "gemv.cu": gemvSource, "gemvq3.cu": gemvq3Source, "gemvq4.cu": gemvq4Source, "linear.cu": linearSource, "skinny.cu": skinnySource,
	"kvcache.cu": kvcacheSource, "pack.cu": packSource, "decode_mma.cu": decodeMMASource, "decode_wgmma.cu": decodeWGMMASource, "gemvq6dec.cu": gemvq6decSource}

// earlyReaders are the kernels that read memory before their dependency
// wait (bitdecode.cuh's kPDLEarly: lengths, the block table and the blocks
// packed before the launch's new tokens, which the kernel ahead does not
// write). For them the test asks instead that the last wait of the body
// come before everything the kernel ahead may write or the kernel writes:
// the query, the residual, the outputs and the merge.
var earlyReaders = map[string]bool{"decode_mma": true, "decode_wgmma": true}

// afterWait are the accesses an early reader may only make after its last
// dependency wait.
var afterWait = []string{"loadQueryFrag", "resK", "resSlots", "partO[", "partML[", "out[", "finishOneSplit", "finishSplits",
	"mergeWarps", "mergeSplits", "atomic", "__threadfence"}

// dependentWait matches the calls that open a kernel of a GridDependent
// program: bitdecode.cuh's gridDependencyWait, ops.cu's startDependent or
// startDependentFirst (each makes it first but for the trigger, which
// touches no memory), or a call of a waiting helper (waitingHelpers).
var dependentWait = regexp.MustCompile(`\b(gridDependencyWait|startDependent|startDependentFirst)\(\);|\b(rowSums|leanLoop|addRMSNormCluster)<[^>]*>\(`)

// waitingHelpers are the device functions that make a kernel's dependency
// wait in its stead (gemvq3.cu's rowSums, v3.2's sums of gemv_q3 and
// gemv_q3_dec, early code loads and all; gemvq4.cu's leanLoop, gemv_q5's
// LEAN prologue and loop; ops.cu's addRMSNormCluster, add_rmsnorm_cluster's
// and add_rmsnorm_cluster_sel's body): the test holds each one's body to a
// kernel's rule, and dependentWait counts a call of it as the wait.
var waitingHelpers = map[string]bool{"rowSums": true, "leanLoop": true, "addRMSNormCluster": true}

// helperHead matches the start of a device function's definition.
var helperHead = regexp.MustCompile(`__device__\s+(?:__forceinline__\s+)?void\s+(\w+)\s*\(`)

// earlyWeights matches the loads allowed before the dependency wait, of
// memory the kernel right ahead does not write: gemv.cu's and skinny.cu's
// early weight loads (their one call of prefetch, preloadW or preloadW2)
// and add_rmsnorm_cluster's residual and norm weight (normLoad), and
// linear.cu's tiled kernels' first stages of weights (tiledEarlyW), each
// where its early argument is set.
var earlyWeights = regexp.MustCompile(`if \(early\) (?:prefetch<U>|preloadCodes|preloadW<NT>|preloadW2|normLoad|tiledEarlyW<[^>]*>)\([^;]*\);`)

// globalHead matches the start of a kernel definition.
var globalHead = regexp.MustCompile(`__global__\s+void\s+(?:(?:__launch_bounds__|__cluster_dims__)\([^)]*\)\s+)*(\w+)\s*\(`)

// kernelBodies returns each __global__ function's name and body (between
// its outer braces) in src.
func kernelBodies(t *testing.T, src string) map[string]string {
	t.Helper()
	return functionBodies(t, src, globalHead)
}

// functionBodies returns the name and body (between its outer braces) of
// each function of src whose definition head matches (its name the first
// submatch).
func functionBodies(t *testing.T, src string, head *regexp.Regexp) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, m := range head.FindAllStringSubmatchIndex(src, -1) {
		name := src[m[2]:m[3]]
		open := strings.Index(src[m[1]:], "{")
		if open < 0 {
			t.Fatalf("kernel %s: no body", name)
		}
		i, depth := m[1]+open, 0
		start := i
		for ; i < len(src); i++ {
			switch src[i] {
			case '{':
				depth++
			case '}':
				depth--
			}
			if depth == 0 {
				break
			}
		}
		if depth != 0 {
			t.Fatalf("kernel %s: unbalanced braces", name)
		}
		out[name] = src[start+1 : i]
	}
	return out
}

// TestGridDependentKernelsWait checks the promise a GridDependent program
// makes (cuda.Program.GridDependent): every kernel of it calls the
// dependency wait, in its own body (or a waiting helper's, held to the same
// rule) and before any return or global memory access the source spells as
// a store or a weight load helper; a kernel added to one of these files
// without the wait fails here, before the GPU would let it race the kernel
// ahead of it.
func TestGridDependentKernelsWait(t *testing.T) {
	for name := range gridDependent {
		if _, ok := gridDependentSources[name]; !ok {
			t.Errorf("program %s is GridDependent but the test has no source for it", name)
		}
	}
	// bitdecode.cuh's kernels (decode_combine) are instantiated in the
	// decode programs, so they are held to the same rule.
	sources := map[string]string{headerName: headerSource}
	found := map[string]bool{}
	for name, src := range gridDependentSources {
		sources[name] = src
	}
	for name, src := range sources {
		if name != headerName && !gridDependent[name] {
			t.Errorf("program %s is not in gridDependent", name)
			continue
		}
		bodies := kernelBodies(t, src)
		if len(bodies) == 0 {
			t.Errorf("%s: no kernels found", name)
		}
		for h, body := range functionBodies(t, src, helperHead) {
			if waitingHelpers[h] {
				bodies[h] = body
				found[h] = true
			}
		}
		for k, body := range bodies {
			loc := dependentWait.FindStringIndex(body)
			if loc == nil {
				t.Errorf("%s: kernel %s never waits for its predecessor (gridDependencyWait)", name, k)
				continue
			}
			if earlyReaders[k] {
				all := dependentWait.FindAllStringIndex(body, -1)
				before := body[:all[len(all)-1][0]]
				for _, bad := range afterWait {
					if strings.Contains(before, bad) {
						t.Errorf("%s: kernel %s has %q before its last dependency wait", name, k, bad)
					}
				}
				if !strings.Contains(body[all[len(all)-1][1]:], "gridLaunchDependents();") {
					t.Errorf("%s: kernel %s does not trigger its dependents after its last wait", name, k)
				}
				continue
			}
			// gemv.cu's early weight loads are the one memory access allowed
			// before the wait (weights are not written by the kernel ahead).
			before := earlyWeights.ReplaceAllString(body[:loc[0]], "")
			for _, bad := range []string{"return", "while", "ldg", "prefetch", "cp_async", "__syncthreads", "*reinterpret_cast"} {
				if strings.Contains(before, bad) {
					t.Errorf("%s: kernel %s has %q before its dependency wait; every thread must reach the wait before touching memory", name, k, bad)
				}
			}
		}
	}
	for h := range waitingHelpers {
		if !found[h] {
			t.Errorf("waiting helper %s not found in a GridDependent program", h)
		}
	}
}

// TestSessionOptions checks how a decode plan's PDL mode and merge fence
// reach its program: PDLAuto is a programmatic dependent with early loads
// for decode_mma.cu and for decode_wgmma.cu's padded one-sequence plan
// (few, its own program by wgmmaFewDefine), an ordinary launch for
// decode_wgmma.cu's other plans.
func TestSessionOptions(t *testing.T) {
	for _, tt := range []struct {
		k         DecodeKernel
		tune      DecodeTuning
		few       bool
		dependent bool
		opts      []string
	}{
		{DecodeMMA, DecodeTuning{}, false, true, nil},
		{DecodeWGMMA, DecodeTuning{}, false, false, nil},
		{DecodeWGMMA, DecodeTuning{}, true, true, []string{wgmmaFewDefine}},
		{DecodeWGMMA, DecodeTuning{PDL: PDLOff}, true, false, []string{wgmmaFewDefine}},
		{DecodeWGMMA, DecodeTuning{PDL: PDLEarly}, false, true, nil},
		{DecodeMMA, DecodeTuning{PDL: PDLWait}, false, true, []string{pdlEarlyDefine}},
		{DecodeMMA, DecodeTuning{PDL: PDLOff, MergeFenceSC: true}, false, false, []string{mergeFenceSCDefine}},
	} {
		name := map[DecodeKernel]string{DecodeMMA: "decode_mma.cu", DecodeWGMMA: "decode_wgmma.cu"}[tt.k]
		prog := program(name, "", nil, nil)
		sessionOptions(&prog, tt.k, tt.tune, tt.few)
		if prog.GridDependent != tt.dependent || strings.Join(prog.Options, " ") != strings.Join(tt.opts, " ") {
			t.Errorf("%s %+v: GridDependent %v, options %q; want %v, %q", name, tt.tune, prog.GridDependent, prog.Options, tt.dependent, tt.opts)
		}
	}
}
