package kernels

import (
	"regexp"
	"strings"
	"testing"
)

// gridDependentSources maps each program of gridDependent to its source.
var gridDependentSources = map[string]string{"ops.cu": opsSource, "gemv.cu": gemvSource, "linear.cu": linearSource}

// dependentWait matches the calls that open a kernel of a GridDependent
// program: bitdecode.cuh's gridDependencyWait, or ops.cu's startDependent
// (which makes it first).
var dependentWait = regexp.MustCompile(`\b(gridDependencyWait|startDependent)\(\);`)

// earlyWeights matches the loads allowed before the dependency wait, of
// memory the kernel right ahead does not write: gemv.cu's early weight
// loads (its one call of prefetch) and add_rmsnorm_cluster's residual and
// norm weight (normLoad), each where its early argument is set.
var earlyWeights = regexp.MustCompile(`if \(early\) (?:prefetch<U>|normLoad)\([^;]*\);`)

// globalHead matches the start of a kernel definition.
var globalHead = regexp.MustCompile(`__global__\s+void\s+(?:(?:__launch_bounds__|__cluster_dims__)\([^)]*\)\s+)*(\w+)\s*\(`)

// kernelBodies returns each __global__ function's name and body (between
// its outer braces) in src.
func kernelBodies(t *testing.T, src string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, m := range globalHead.FindAllStringSubmatchIndex(src, -1) {
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
// dependency wait, in its own body and before any return or global memory
// access the source spells as a store or a weight load helper; a kernel
// added to one of these files without the wait fails here, before the GPU
// would let it race the kernel ahead of it.
func TestGridDependentKernelsWait(t *testing.T) {
	for name := range gridDependent {
		if _, ok := gridDependentSources[name]; !ok {
			t.Errorf("program %s is GridDependent but the test has no source for it", name)
		}
	}
	for name, src := range gridDependentSources {
		if !gridDependent[name] {
			t.Errorf("program %s is not in gridDependent", name)
			continue
		}
		bodies := kernelBodies(t, src)
		if len(bodies) == 0 {
			t.Errorf("%s: no kernels found", name)
		}
		for k, body := range bodies {
			loc := dependentWait.FindStringIndex(body)
			if loc == nil {
				t.Errorf("%s: kernel %s never waits for its predecessor (gridDependencyWait)", name, k)
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
}
