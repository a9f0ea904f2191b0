package gpu_test

// Tests of tensor-parallel groups (group.go): NCCL's all-reduce against a
// float64 sum, one rank, CUDA graph capture and replay of a queue with an
// all-reduce between kernels, bad arguments; and the all-reduce benchmark.
// They skip without a GPU or without NCCL.

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/backend/gpu"
	"github.com/bitdecode/bitdecode/gpu/cuda"
)

// openGroup opens a group of n ranks (0: every GPU present), skipping the
// test without a GPU, without NCCL or with fewer GPUs than n.
func openGroup(tb testing.TB, n int, o gpu.Options) ([]*gpu.Backend, backend.Communicator) {
	tb.Helper()
	have, err := cuda.DeviceCount()
	if err != nil {
		tb.Skipf("no CUDA device: %v", err)
	}
	if n == 0 {
		n = have
	}
	if have < n {
		tb.Skipf("%d GPUs; the test needs %d", have, n)
	}
	if _, err := cuda.NCCLVersion(); err != nil {
		tb.Skipf("no NCCL: %v", err)
	}
	ranks, comm, err := gpu.OpenGroup(n, o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := comm.Close(); err != nil {
			tb.Error(err)
		}
		for _, b := range ranks {
			if err := b.Close(); err != nil {
				tb.Error(err)
			}
		}
	})
	return ranks, comm
}

// rankParts allocates one F32 tensor of shape on every rank and uploads
// vals[r] to rank r's.
func rankParts(tb testing.TB, ranks []*gpu.Backend, vals [][]float32, shape ...int) []backend.Tensor {
	tb.Helper()
	parts := make([]backend.Tensor, len(ranks))
	for r, b := range ranks {
		t, err := b.Alloc(backend.F32, shape...)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { b.Free(t) })
		if vals != nil {
			if err := b.Upload(t, vals[r]); err != nil {
				tb.Fatal(err)
			}
		}
		parts[r] = t
	}
	return parts
}

// randomRanks returns n slices of size values uniform in [-1, 1).
func randomRanks(rng *rand.Rand, n, size int) [][]float32 {
	vals := make([][]float32, n)
	for r := range vals {
		vals[r] = make([]float32, size)
		for i := range vals[r] {
			vals[r][i] = 2*rng.Float32() - 1
		}
	}
	return vals
}

// checkSum checks every rank's result against the float64 sum of vals: a
// float32 sum of n terms in any order is within (n-1)·u32·Σ|x| of it (one
// rounding per add), and every rank holds the same bits (the model's
// replicated activations rely on it).
func checkSum(t *testing.T, ranks []*gpu.Backend, parts []backend.Tensor, vals [][]float32) {
	t.Helper()
	n, size := len(ranks), len(vals[0])
	got := make([][]float32, n)
	for r, b := range ranks {
		got[r] = make([]float32, size)
		for i := range got[r] {
			got[r][i] = float32(math.NaN()) // poisoned: a value not written fails
		}
		if err := b.Download(got[r], parts[r]); err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	bad := 0
	for i := range size {
		var sum, abs float64
		for r := range n {
			sum += float64(vals[r][i])
			abs += math.Abs(float64(vals[r][i]))
		}
		tol := float64(n-1) * u32 * abs
		for r := range n {
			g := got[r][i]
			if math.IsNaN(float64(g)) || math.Abs(float64(g)-sum) > tol {
				if bad++; bad <= 5 {
					t.Errorf("size %d, element %d, rank %d: %g, want %g ± %.3g", size, i, r, g, sum, tol)
				}
			}
			if math.Float32bits(g) != math.Float32bits(got[0][i]) {
				if bad++; bad <= 5 {
					t.Errorf("size %d, element %d: rank %d holds %g, rank 0 %g (want the same bits)", size, i, r, g, got[0][i])
				}
			}
		}
	}
	if bad > 5 {
		t.Errorf("size %d: %d mismatches in all", size, bad)
	}
}

func TestGroupAllReduce(t *testing.T) {
	ranks, comm := openGroup(t, 0, options)
	if comm.Ranks() != len(ranks) {
		t.Fatalf("Ranks() = %d, want %d", comm.Ranks(), len(ranks))
	}
	t.Logf("%d ranks: %s", len(ranks), ranks[0].Name())
	rng := rand.New(rand.NewPCG(23, 1))
	sizes := []int{1, 1023, 1<<20 + 3}
	if testing.Short() {
		sizes = sizes[:2]
	}
	for _, size := range sizes {
		vals := randomRanks(rng, len(ranks), size)
		parts := rankParts(t, ranks, vals, size)
		if err := comm.AllReduce(parts); err != nil {
			t.Fatal(err)
		}
		checkSum(t, ranks, parts, vals)
	}
	// Two all-reduces in a row on a matrix: the second sums the first's
	// sums, n·Σx.
	vals := randomRanks(rng, len(ranks), 3*4096)
	parts := rankParts(t, ranks, vals, 3, 4096)
	for range 2 {
		if err := comm.AllReduce(parts); err != nil {
			t.Fatal(err)
		}
	}
	// The second all-reduce adds n equal float32 sums: exact for n a
	// power of two, else one more rounding per add.
	for r, b := range ranks {
		got := make([]float32, len(vals[0]))
		if err := b.Download(got, parts[r]); err != nil {
			t.Fatal(err)
		}
		for i, g := range got {
			var sum, abs float64
			for q := range vals {
				sum += float64(vals[q][i])
				abs += math.Abs(float64(vals[q][i]))
			}
			n := float64(len(ranks))
			tol := n * (2*(n-1)*u32*abs + 1e-30)
			if math.Abs(float64(g)-n*sum) > tol {
				t.Fatalf("twice, rank %d, element %d: %g, want %g ± %.3g", r, i, g, n*sum, tol)
			}
		}
	}
}

func TestGroupOneRank(t *testing.T) {
	ranks, comm := openGroup(t, 1, options)
	if comm.Ranks() != 1 {
		t.Fatalf("Ranks() = %d, want 1", comm.Ranks())
	}
	vals := randomRanks(rand.New(rand.NewPCG(1, 2)), 1, 1023)
	parts := rankParts(t, ranks, vals, 1023)
	if err := comm.AllReduce(parts); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 1023)
	if err := ranks[0].Download(got, parts[0]); err != nil {
		t.Fatal(err)
	}
	for i, g := range got {
		if math.Float32bits(g) != math.Float32bits(vals[0][i]) {
			t.Fatalf("element %d: %g, want %g (the sum of one rank is its part)", i, g, vals[0][i])
		}
	}
}

// TestGroupGraphReplay runs a step of kernels, an all-reduce and kernels,
// issued as backend/tp does (rank 0's ops, then rank 1's), four times: the
// first runs directly, the second is captured into a CUDA graph, the others
// replay it; every run must give the first's bits.
func TestGroupGraphReplay(t *testing.T) {
	if options.NoGraphs {
		t.Skip("BITDECODE_NO_GRAPHS is set")
	}
	ranks, comm := openGroup(t, 0, options)
	const size, adds = 4096, 8 // 2·adds+1 ops a flush: more than graphMinOps (16)
	vals := randomRanks(rand.New(rand.NewPCG(7, 7)), len(ranks), size)
	xs := rankParts(t, ranks, vals, size)
	as := rankParts(t, ranks, nil, size)
	cs := rankParts(t, ranks, nil, size)
	step := func() [][]float32 {
		for r, b := range ranks {
			b.Add(as[r], xs[r], xs[r])
			for range adds - 1 {
				b.Add(as[r], as[r], xs[r]) // a = (adds+1)·x
			}
		}
		if err := comm.AllReduce(as); err != nil {
			t.Fatal(err)
		}
		for r, b := range ranks {
			b.Add(cs[r], as[r], xs[r])
			for range adds - 1 {
				b.Add(cs[r], cs[r], xs[r]) // c = Σ a + adds·x
			}
		}
		out := make([][]float32, len(ranks))
		for r, b := range ranks {
			out[r] = make([]float32, size)
			if err := b.Download(out[r], cs[r]); err != nil {
				t.Fatalf("rank %d: %v", r, err)
			}
		}
		return out
	}
	before := make([]gpu.GraphStats, len(ranks))
	for r, b := range ranks {
		before[r] = b.GraphStats()
	}
	direct := step()
	// The direct step against float64: c = Σ_q (adds+1)·x_q + adds·x_r,
	// with a few roundings per element.
	for r := range ranks {
		for i := range size {
			var sum, abs float64
			for q := range ranks {
				sum += float64(adds+1) * float64(vals[q][i])
				abs += float64(adds+1) * math.Abs(float64(vals[q][i]))
			}
			want := sum + adds*float64(vals[r][i])
			tol := float64(2*adds+len(ranks)) * u32 * (abs + adds*math.Abs(float64(vals[r][i])))
			if g := direct[r][i]; math.Abs(float64(g)-want) > tol {
				t.Fatalf("direct step, rank %d, element %d: %g, want %g ± %.3g", r, i, g, want, tol)
			}
		}
	}
	for run := 2; run <= 4; run++ {
		got := step()
		for r := range ranks {
			for i := range size {
				if math.Float32bits(got[r][i]) != math.Float32bits(direct[r][i]) {
					t.Fatalf("run %d, rank %d, element %d: %g, the direct run %g", run, r, i, got[r][i], direct[r][i])
				}
			}
		}
	}
	for r, b := range ranks {
		st := b.GraphStats()
		captured, replayed := st.Captured-before[r].Captured, st.Replayed-before[r].Replayed
		t.Logf("rank %d: %+v", r, st)
		if captured < 1 || replayed < 1 {
			t.Errorf("rank %d: %d flushes captured and %d replayed over four steps; want at least one of each", r, captured, replayed)
		}
	}
}

func TestGroupBadArguments(t *testing.T) {
	ranks, comm := openGroup(t, 0, options)
	n := len(ranks)
	good := rankParts(t, ranks, nil, 8)
	other := rankParts(t, ranks, nil, 9)
	half, err := ranks[0].Alloc(backend.F16, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer ranks[0].Free(half)
	swapped := append([]backend.Tensor(nil), good...)
	if n > 1 {
		swapped[0], swapped[1] = swapped[1], swapped[0]
	}
	mixed := append([]backend.Tensor(nil), good...)
	mixed[n-1] = other[n-1]
	f16 := append([]backend.Tensor(nil), good...)
	f16[0] = half
	cases := []struct {
		name  string
		parts []backend.Tensor
		want  string
	}{
		{"too few parts", good[:n-1], "parts over"},
		{"too many parts", append(append([]backend.Tensor(nil), good...), good[0]), "parts over"},
		{"nil part", append([]backend.Tensor{nil}, good[1:]...), "nil tensor"},
		{"f16 part", f16, "want F32"},
	}
	if n > 1 {
		cases = append(cases,
			struct {
				name  string
				parts []backend.Tensor
				want  string
			}{"parts of other ranks", swapped, "not from this backend"},
			struct {
				name  string
				parts []backend.Tensor
				want  string
			}{"shapes differ", mixed, "rank 0's"})
	}
	for _, tc := range cases {
		if err := comm.AllReduce(tc.parts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	// A tensor of a backend outside the group.
	outside := gpuBackend(t)
	x, err := outside.Alloc(backend.F32, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer outside.Free(x)
	parts := append([]backend.Tensor{x}, good[1:]...)
	if err := comm.AllReduce(parts); err == nil || !strings.Contains(err.Error(), "not from this backend") {
		t.Errorf("a part of another backend: err = %v", err)
	}
	// The good parts still work, and every rank is clean.
	if err := comm.AllReduce(good); err != nil {
		t.Fatal(err)
	}
	for r, b := range ranks {
		if err := b.Sync(); err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

func TestGroupTooFewGPUs(t *testing.T) {
	have, err := cuda.DeviceCount()
	if err != nil {
		t.Skipf("no CUDA device: %v", err)
	}
	_, _, err = gpu.OpenGroup(have+1, options)
	want := fmt.Sprintf("--tp %d needs %d GPUs; this machine has %d", have+1, have+1, have)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("OpenGroup(%d): err = %v, want one containing %q", have+1, err, want)
	}
}

func TestGroupArgumentsWithoutGPU(t *testing.T) {
	for _, tc := range []struct {
		n    int
		o    gpu.Options
		want string
	}{
		{0, gpu.Options{}, "want at least 1"},
		{-1, gpu.Options{}, "want at least 1"},
		{1, gpu.Options{CollectiveTimeout: -time.Second}, "CollectiveTimeout"},
	} {
		_, _, err := gpu.OpenGroup(tc.n, tc.o)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("OpenGroup(%d, %+v): err = %v, want one containing %q", tc.n, tc.o, err, tc.want)
		}
	}
	if cuda.Available() == nil {
		return
	}
	_, _, err := gpu.OpenGroup(2, options)
	if err == nil || !(errors.Is(err, cuda.ErrNoDriver) || errors.Is(err, cuda.ErrNoDevice)) {
		t.Errorf("OpenGroup(2) without a GPU: err = %v, want one wrapping ErrNoDriver or ErrNoDevice", err)
	}
}

// allReduceSizes are the benchmark's sizes in floats: an 8B model's decode
// step all-reduces rows of 4096 (70B: 8192) at 1 and 64 rows; 16Mi floats
// (64 MiB) measure the bus bandwidth.
var allReduceSizes = []struct {
	name   string
	floats int
}{
	{"8B-1row", 4096}, {"8B-64rows", 64 * 4096},
	{"70B-1row", 8192}, {"70B-64rows", 64 * 8192},
	{"64MiB", 16 << 20},
}

// BenchmarkAllReduce times in-place float32 all-reduces over every GPU
// present as a decode step issues them: queued on the ranks' op queues,
// replayed as CUDA graphs of 32 (the queue's segment), reported as µs per
// all-reduce and NCCL's bus bandwidth, 2(n-1)/n of the bytes per µs.
func BenchmarkAllReduce(b *testing.B) {
	ranks, comm := openGroup(b, 0, options)
	n := len(ranks)
	const perIter = 64 // all-reduces per iteration: two graphs of 32
	for _, sz := range allReduceSizes {
		b.Run(fmt.Sprintf("n=%d/%s", n, sz.name), func(b *testing.B) {
			parts := rankParts(b, ranks, nil, sz.floats)
			for r, rb := range ranks { // zeros: the sums stay finite
				if err := rb.Upload(parts[r], make([]float32, sz.floats)); err != nil {
					b.Fatal(err)
				}
			}
			iter := func() {
				for range perIter {
					if err := comm.AllReduce(parts); err != nil {
						b.Fatal(err)
					}
				}
			}
			sync := func() {
				for r, rb := range ranks {
					if err := rb.Sync(); err != nil {
						b.Fatalf("rank %d: %v", r, err)
					}
				}
			}
			for range 3 { // direct, captured, replayed
				iter()
			}
			sync()
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				iter()
			}
			sync()
			el := time.Since(start)
			b.StopTimer()
			us := el.Seconds() * 1e6 / float64(b.N*perIter)
			b.ReportMetric(us, "us/allreduce")
			bytes := float64(4 * sz.floats)
			b.ReportMetric(bytes*2*float64(n-1)/float64(n)/(us*1e3), "busGB/s")
			b.ReportMetric(bytes/(us*1e3), "algGB/s")
		})
	}
}

// TestGroupGraphReplayBatch is TestGroupGraphReplay at a decode batch of
// more rows than linear.cu's narrow kernel (cuBLASLt's keyed path), with
// every step's tensors allocated and freed as backend/tp's ranks do at TP
// 2 (issue #23): int32 tensors allocated in one order and freed in another,
// which with the pool's old last-freed-first reuse gave them new addresses
// (new graph keys) for 6 steps in a row. The first step allocates fresh
// memory and the second takes it from the pool (new addresses, so both run
// directly), the third captures; from the fourth on, every rank must replay
// (nothing captured), with the first (direct) step's bits; the first step
// is checked against float64.
func TestGroupGraphReplayBatch(t *testing.T) {
	if options.NoGraphs {
		t.Skip("BITDECODE_NO_GRAPHS is set")
	}
	ranks, comm := openGroup(t, 0, options)
	const T, K, adds, steps = 64, 256, 8, 8
	rng := rand.New(rand.NewPCG(23, 23))
	wv := randomRanks(rng, len(ranks), K*K)
	xv := randomRanks(rng, len(ranks), T*K)
	for r := range wv {
		for i := range wv[r] { // fp16-exact weights
			wv[r][i] = float32(math.Round(float64(wv[r][i])*1024) / 1024)
		}
	}
	ws := make([]backend.Weight, len(ranks))
	for r, b := range ranks {
		w, err := b.LoadWeight(fmt.Sprintf("w%d", r), backend.F32, []int{K, K}, encode(backend.F32, wv[r]))
		if err != nil {
			t.Fatal(err)
		}
		ws[r] = w
		defer b.FreeWeight(w)
	}
	ident := make([]int32, T)
	for i := range ident {
		ident[i] = int32(i)
	}
	step := func() [][]float32 {
		type rankStep struct{ ids, pos, rows, local, x, x2, x3, y, c backend.Tensor }
		rs := make([]rankStep, len(ranks))
		alloc := func(b *gpu.Backend, dt backend.DType, shape ...int) backend.Tensor {
			tt, err := b.Alloc(dt, shape...)
			if err != nil {
				t.Fatal(err)
			}
			return tt
		}
		for r, b := range ranks {
			s := &rs[r]
			s.x = alloc(b, backend.F32, T, K)
			if err := b.Upload(s.x, xv[r]); err != nil {
				t.Fatal(err)
			}
			s.ids, s.pos, s.rows = alloc(b, backend.I32, T), alloc(b, backend.I32, T), alloc(b, backend.I32, T)
			s.local = alloc(b, backend.I32, T) // after the others, as tp's Embedding allocates it
			for _, u := range []backend.Tensor{s.ids, s.pos, s.rows, s.local} {
				if err := b.UploadInt32(u, ident); err != nil {
					t.Fatal(err)
				}
			}
			s.x2, s.x3, s.y, s.c = alloc(b, backend.F32, T, K), alloc(b, backend.F32, T, K), alloc(b, backend.F32, T, K), alloc(b, backend.F32, T, K)
		}
		for r, b := range ranks { // op by op, rank 0 first, as backend/tp issues them
			s := rs[r]
			b.Rows(s.x2, s.x, s.ids)
			b.Rows(s.x3, s.x2, s.local)
			b.Rows(s.x2, s.x3, s.pos)
			b.Rows(s.x3, s.x2, s.rows)
			b.Linear(s.y, s.x3, ws[r], nil)
			for range adds {
				b.Add(s.c, s.x3, s.x3) // busy work: more than graphMinOps ops
			}
		}
		ys := make([]backend.Tensor, len(ranks))
		for r := range rs {
			ys[r] = rs[r].y
		}
		if err := comm.AllReduce(ys); err != nil {
			t.Fatal(err)
		}
		for r, b := range ranks {
			s := rs[r]
			b.Add(s.c, s.y, s.x3)
			for range adds - 1 {
				b.Add(s.c, s.c, s.x3) // c = Σ_q W_q·x_q + adds·x_r
			}
		}
		out := make([][]float32, len(ranks))
		for r, b := range ranks {
			out[r] = make([]float32, T*K)
			if err := b.Download(out[r], rs[r].c); err != nil {
				t.Fatalf("rank %d: %v", r, err)
			}
		}
		for r, b := range ranks { // freed as model.Forward's arena frees tp's parts
			s := rs[r]
			for _, f := range []backend.Tensor{s.ids, s.local, s.pos, s.rows, s.x, s.x2, s.x3, s.y, s.c} {
				b.Free(f)
			}
		}
		return out
	}
	stats := func() []gpu.GraphStats {
		st := make([]gpu.GraphStats, len(ranks))
		for r, b := range ranks {
			st[r] = b.GraphStats()
		}
		return st
	}
	before := stats()
	direct := step()
	// Against float64: x rounded to fp16 (u16), the fp32 GEMM (2·(K+2)·u32
	// of Σ|x·w|), the all-reduce and the adds (one rounding each).
	for r := range ranks {
		for i := range T * K {
			tt, n := i/K, i%K
			var want, abs float64
			for q := range ranks {
				for k := range K {
					xw := float64(xv[q][tt*K+k]) * float64(wv[q][n*K+k])
					want += xw
					abs += math.Abs(xw)
				}
			}
			xr := float64(xv[r][i])
			want += adds * xr
			tol := (u16+2*float64(K+2+len(ranks))*u32)*abs + float64(2*adds)*u32*(abs+adds*math.Abs(xr)) + 0x1p-25*float64(K)
			if g := direct[r][i]; math.IsNaN(float64(g)) || math.Abs(float64(g)-want) > tol {
				t.Fatalf("direct step, rank %d, element %d: %g, want %g ± %.3g", r, i, g, want, tol)
			}
		}
	}
	for run := 2; run <= steps; run++ {
		got := step()
		after := stats()
		for r := range ranks {
			sameBits(t, fmt.Sprintf("run %d, rank %d", run, r), got[r], direct[r])
			captured, replayed := after[r].Captured-before[r].Captured, after[r].Replayed-before[r].Replayed
			t.Logf("run %d, rank %d: %d captured, %d replayed, %d direct", run, r, captured, replayed, after[r].Direct-before[r].Direct)
			if run >= 4 && (captured != 0 || replayed < 1) {
				t.Errorf("run %d, rank %d: %d flushes captured, %d replayed; from the fourth run on every step must replay its graphs (stable addresses, stable keys)", run, r, captured, replayed)
			}
		}
		before = after
	}
}
