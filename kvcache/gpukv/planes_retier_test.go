package gpukv

// Tests of the GPU re-tier (kernels.PlanesRetier) against the host policy
// kvcache.TierPolicy: the same tier maps, ties and special masses included.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/kvcache"
)

// retierSpecs are the tier policies of the re-tier tests: mixes with and
// without evictions, windows and sinks larger than short sequences,
// uniform reads and all-HIGH.
var retierSpecs = []string{"h20:m40:l40", "h30:m30:l20:e20:w8:s2", "m100:w0:s0", "l100:w0:s0", "h100", "h50:e50:w0:s0",
	"h10:m30:l60:w3000:s4", "h0:m50:l50:w0:s0", "h1:m1:l1:e97:w1:s1"}

// forRetierCases calls f for every policy of retierSpecs, every length in
// lens and every kind of masses retierMasses draws.
func forRetierCases(t *testing.T, lens []int, f func(spec string, p kv.PlaneSpec, pol kvcache.TierPolicy, n int, kind string)) {
	t.Helper()
	for _, spec := range retierSpecs {
		p, err := kv.ParsePlanePolicy(spec, kv.MustParseSpec("bw").Planes)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range lens {
			for _, kind := range []string{"uniform", "ties", "special", "equal"} {
				f(spec, p, kvcache.TierPolicy{Spec: p}, n, kind)
			}
		}
	}
}

// retierMasses draws n masses of kind: "uniform" in [0, 1); "ties" a few
// values (±0 among them); "special" NaN, ±Inf, ±0, negatives, subnormals
// and huge values among ordinary ones; "equal" one value.
func retierMasses(r *rand.Rand, kind string, n int) []float32 {
	m := make([]float32, n)
	special := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)), -1.5,
		1e-42, 3e38, -3e38, 0.25}
	for i := range m {
		switch kind {
		case "uniform":
			m[i] = r.Float32()
		case "ties":
			m[i] = float32(r.IntN(4)) / 4
			if m[i] == 0 && r.IntN(2) == 0 {
				m[i] = float32(math.Copysign(0, -1))
			}
		case "special":
			if r.IntN(3) == 0 {
				m[i] = special[r.IntN(len(special))]
			} else {
				m[i] = r.Float32() * 8
			}
		case "equal":
			m[i] = 0.5
		}
	}
	return m
}

// TestRetierBoundsMatchPolicy checks the host half of the GPU re-tier
// without a device: the counts retierBounds books equal those of the
// policy's tier maps, for every spec and length, whatever the masses.
func TestRetierBoundsMatchPolicy(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, spec := range retierSpecs {
		p, err := kv.ParsePlanePolicy(spec, kv.MustParseSpec("bw").Planes)
		if err != nil {
			t.Fatal(err)
		}
		pol := kvcache.TierPolicy{Spec: p}
		for n := 0; n < 300; n += 1 + n/8 {
			tiers := make([]kv.Tier, n)
			pol.Retier(tiers, retierMasses(r, "uniform", n), n)
			j, counts := retierBounds(p, n)
			if got := tierCounts(tiers); got != counts {
				t.Fatalf("%s, %d tokens: retierBounds counts %v, the policy's maps %v (job %+v)", spec, n, counts, got, j)
			}
			if err := kernels.CheckRetierJobs([]kernels.PlanesRetierJob{j}, n); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestGPUPlaneRetierMatchesPolicy re-tiers on the GPU (the three kernel
// versions) two (slot, layer)s of
// three KV heads at once and checks every tier map against
// kvcache.TierPolicy.Retier on the same masses (uniform, ties, NaN/Inf/±0,
// all equal), the counts and run offsets (the new tier's run stored last),
// then appends tokens and checks they join that run. The index and counts
// start poisoned.
func TestGPUPlaneRetierMatchesPolicy(t *testing.T) {
	be := gpuBackend(t)
	dev := be.Device()
	rt, err := kernels.LoadPlanesRetier(dev)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []struct {
		name   string
		v1, v2 bool
	}{{"v3", false, false}, {"v2", false, true}, {"v1", true, false}} {
		rt.V1, rt.V2 = v.v1, v.v2
		t.Run(v.name, func(t *testing.T) { testGPURetier(t, dev, rt) })
	}
}

func testGPURetier(t *testing.T, dev *cuda.Device, rt *kernels.PlanesRetier) {
	r := rand.New(rand.NewPCG(7, 8))
	const hkv, nSL, added = 3, 2, 3
	var err error
	lens := []int{0, 1, 5, 63, 100, 1000, 4097, 20000}
	if testing.Short() {
		lens = []int{0, 5, 100, 1000}
	}
	stride := lens[len(lens)-1] + added
	rows := nSL * hkv
	var mass, index, counts, offsets, jobs cuda.DevicePtr
	for _, a := range []struct {
		p     *cuda.DevicePtr
		bytes int
	}{{&mass, rows * stride * 4}, {&index, rows * stride * 4}, {&counts, rows * 16}, {&offsets, rows * 16}, {&jobs, 64 * 4}} {
		if *a.p, err = dev.Alloc(a.bytes); err != nil {
			t.Fatal(err)
		}
		defer dev.Free(*a.p)
	}
	poison := make([]int32, rows*stride)
	for i := range poison {
		poison[i] = -7
	}
	forRetierCases(t, lens, func(spec string, p kv.PlaneSpec, pol kvcache.TierPolicy, n int, kind string) {
		what := fmt.Sprintf("%s, %d tokens, %s masses", spec, n, kind)
		hostMass := make([]float32, rows*stride)
		for i := range rows {
			copy(hostMass[i*stride:], retierMasses(r, kind, n))
		}
		var words []int32
		var want [kv.NumTiers]int
		var last kv.Tier
		for sl := range nSL {
			j, c := retierBounds(p, n)
			j.SL = sl
			words = j.Words(words)
			want, last = c, j.Last
		}
		app := len(words)
		words = kernels.PlanesAppendJob{Slot: 0, Pos: n, Len: added, Tier: last}.Words(words)
		err := dev.Do(func(x *cuda.Ctx) error {
			for _, up := range []struct {
				p cuda.DevicePtr
				b []byte
			}{{mass, cuda.Bytes(hostMass)}, {index, cuda.Bytes(poison)}, {counts, cuda.Bytes(poison[:rows*4])},
				{offsets, cuda.Bytes(poison[:rows*4])}, {jobs, cuda.Bytes(words)}} {
				if err := x.HtoD(up.p, up.b); err != nil {
					return err
				}
			}
			if err := rt.LaunchRetier(x, dev.Stream(), jobs, nSL, mass, index, counts, offsets, hkv, stride); err != nil {
				return err
			}
			return x.SyncStream(dev.Stream())
		})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		got := downloadIndex(t, dev, index, counts, offsets, rows, stride)
		maps := make([][]kv.Tier, rows)
		for i := range rows {
			tiers := make([]kv.Tier, n)
			pol.Retier(tiers, hostMass[i*stride:i*stride+n], n)
			maps[i] = tiers
			checkRetierRow(t, fmt.Sprintf("%s, row %d", what, i), got, i, stride, tiers, want, last)
		}
		// Append: the new tokens join the last run of every row.
		err = dev.Do(func(x *cuda.Ctx) error {
			if err := rt.LaunchAppend(x, dev.Stream(), jobs+cuda.DevicePtr(4*app), 1, index, counts, offsets, hkv, nSL, stride); err != nil {
				return err
			}
			return x.SyncStream(dev.Stream())
		})
		if err != nil {
			t.Fatalf("%s: append: %v", what, err)
		}
		got = downloadIndex(t, dev, index, counts, offsets, rows, stride)
		wantAdded := want
		wantAdded[last] += added
		for i := range rows {
			tiers := append(maps[i], last, last, last)
			checkRetierRow(t, fmt.Sprintf("%s, row %d after append", what, i), got, i, stride, tiers, wantAdded, last)
		}
	})
}

// deviceIndex is a downloaded persistent index.
type deviceIndex struct {
	index, counts, offsets []int32
}

func downloadIndex(t *testing.T, dev *cuda.Device, index, counts, offsets cuda.DevicePtr, rows, stride int) deviceIndex {
	t.Helper()
	d := deviceIndex{make([]int32, rows*stride), make([]int32, rows*4), make([]int32, rows*4)}
	for _, a := range []struct {
		dst []int32
		src cuda.DevicePtr
	}{{d.index, index}, {d.counts, counts}, {d.offsets, offsets}} {
		if err := dev.DtoH(cuda.Bytes(a.dst), a.src); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// checkRetierRow checks row i of a downloaded index: its tier map equals
// want, its counts wantCounts, and the run of tier last ends the stored
// entries.
func checkRetierRow(t *testing.T, what string, d deviceIndex, i, stride int, want []kv.Tier, wantCounts [kv.NumTiers]int, last kv.Tier) {
	t.Helper()
	var c [kv.NumTiers]int32
	var gc [kv.NumTiers]int
	for k := range c {
		c[k] = d.counts[4*i+k]
		gc[k] = int(c[k])
	}
	if gc != wantCounts {
		t.Fatalf("%s: counts %v, want %v", what, gc, wantCounts)
	}
	offs := d.offsets[4*i : 4*i+3]
	stored := int(c[kv.High] + c[kv.Medium] + c[kv.Low])
	if int(offs[last]+c[last]) != stored {
		t.Fatalf("%s: run %d at %d (+%d) is not the last of %d entries (offsets %v)", what, last, offs[last], c[last], stored, offs)
	}
	got, err := kernels.TierMapFromIndex(d.index[i*stride:(i+1)*stride], c, offs, len(want))
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	for pos := range want {
		if got[pos] != want[pos] {
			t.Fatalf("%s: token %d tier %v, the policy's %v", what, pos, got[pos], want[pos])
		}
	}
}

// emulateRetier restates planes.cu's retier_v2 and retier_v3 in Go, step
// for step (radix passes over the 32-bit mass key for the three
// thresholds, digits of the given widths from the top (v2: 8, 8, 8, 8; v3:
// 11, 11, 10); with earlyStop (v3) a selection whose remaining rank is 0
// after a pass stops there, its threshold the prefix with the low bits 0;
// then the compaction's rule: below iff key < T, or key == T and fewer
// than q candidates of key T come before), and returns the tier map of
// job j over mass. It checks the algorithm, not the CUDA.
func emulateRetier(j kernels.PlanesRetierJob, mass []float32, widths []int, earlyStop bool) []kv.Tier {
	massKey := func(m float32) uint32 {
		b := math.Float32bits(m)
		switch {
		case b&0x7FFFFFFF > 0x7F800000:
			return 0
		case b&0x7FFFFFFF == 0:
			return 0x80000000
		case b&0x80000000 != 0:
			return ^b
		}
		return b | 0x80000000
	}
	k := [3]int{j.KE, j.KL, j.KM}
	nc := j.Win - j.Sinks
	var prefix [3]uint32
	remain := k
	var on, act [3]bool
	for s := range 3 {
		on[s] = 0 < k[s] && k[s] < nc
		act[s] = on[s]
	}
	mask, shift := uint32(0), 32
	for _, bits := range widths {
		shift -= bits
		digits := uint32(1)<<bits - 1
		hist := make([][]int, 3)
		for s := range 3 {
			hist[s] = make([]int, 1<<bits)
		}
		for t := j.Sinks; t < j.Win; t++ {
			key := massKey(mass[t])
			for s := range 3 {
				if act[s] && key&mask == prefix[s] {
					hist[s][(key>>shift)&digits]++
				}
			}
		}
		for s := range 3 {
			if !act[s] {
				continue
			}
			below := 0
			for d := range 1 << bits {
				if remain[s] < below+hist[s][d] {
					prefix[s] |= uint32(d) << shift
					remain[s] -= below
					break
				}
				below += hist[s][d]
			}
			if earlyStop && remain[s] == 0 {
				act[s] = false
			}
		}
		mask |= digits << shift
	}
	tiers := make([]kv.Tier, j.N)
	var ties [3]int
	for t := range j.N {
		if t < j.Sinks || t >= j.Win {
			tiers[t] = kv.High
			continue
		}
		key := massKey(mass[t])
		var below [3]bool
		for s := range 3 {
			if !on[s] {
				below[s] = k[s] >= nc
				continue
			}
			below[s] = key < prefix[s] || key == prefix[s] && ties[s] < remain[s]
			if key == prefix[s] {
				ties[s]++
			}
		}
		switch {
		case below[0]:
			tiers[t] = kv.Evicted
		case below[1]:
			tiers[t] = kv.Low
		case below[2]:
			tiers[t] = kv.Medium
		default:
			tiers[t] = kv.High
		}
	}
	return tiers
}

// TestRetierAlgorithmMatchesPolicy checks retier_v2's and retier_v3's
// algorithms (in their Go restatement) against kvcache.TierPolicy.Retier
// without a GPU.
func TestRetierAlgorithmMatchesPolicy(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	lens := []int{0, 1, 5, 63, 100, 1000, 4097}
	if testing.Short() {
		lens = []int{0, 5, 100, 1000}
	}
	for _, v := range []struct {
		name      string
		widths    []int
		earlyStop bool
	}{{"v2", []int{8, 8, 8, 8}, false}, {"v3", []int{11, 11, 10}, true}} {
		forRetierCases(t, lens, func(spec string, p kv.PlaneSpec, pol kvcache.TierPolicy, n int, kind string) {
			mass := retierMasses(r, kind, n)
			want := make([]kv.Tier, n)
			pol.Retier(want, mass, n)
			j, _ := retierBounds(p, n)
			got := emulateRetier(j, mass, v.widths, v.earlyStop)
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("%s: %s, %d tokens, %s masses: token %d tier %v, the policy's %v", v.name, spec, n, kind, i, got[i], want[i])
				}
			}
		})
	}
}
