package bench

// CPU linear layers and whole CPU decode steps (bitdecode bench linear).
//
// LinearCPU times backend/cpu's Linear on the linear-layer shapes of a model
// config for each weight format and row count T: decode (T = 1..few rows,
// judged against the read ceiling: the weight bytes it streams) and
// prefill (T large, judged against the fp32 FMA peak). Weights are made in
// several copies that together exceed the last-level cache and are rotated,
// so a decode row reads its weights from DRAM as a real decode step does.
//
// StepCPU times whole decode steps of a checkpoint on the CPU backend with a
// KV cache of a given format filled with L random tokens, and splits the
// step into linear layers, attention and the rest.
//
// PeakFP32 derives the peak fp32 rate from the clock (measured by a chain
// of dependent integer multiplies, 3 cycles each on x86-64 cores since
// Zen 3 and Skylake) and the SIMD level: an AVX-512 or AVX2 core with two
// 256-bit FMA pipes does 2 × 8 lanes × 2 flops = 32 flops per cycle (Zen 4
// runs 512-bit FMAs on the same two 256-bit pipes).

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"sort"
	"time"

	"github.com/bitdecode/bitdecode/attn"
	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/backend/cpu"
	"github.com/bitdecode/bitdecode/internal/cpufeat"
	"github.com/bitdecode/bitdecode/internal/half"
	"github.com/bitdecode/bitdecode/internal/kvtest"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/model"
	"github.com/bitdecode/bitdecode/wq"
)

// LinearFormats are the weight formats LinearCPU knows: the checkpoint
// formats a CPU Linear reads in place and the packed wq formats.
var LinearFormats = []string{"bf16", "fp16", "fp32", "int8", "wq-int8", "wq-int4", "wq-int3"}

// LinearRowCPU is one (layer shape, format, T) point of LinearCPU.
type LinearRowCPU struct {
	Layer       string  `json:"layer"`
	N           int     `json:"n"`
	K           int     `json:"k"`
	T           int     `json:"t"`
	Format      string  `json:"format"`
	US          float64 `json:"us"`           // median time of one Linear call
	MinUS       float64 `json:"min_us"`       // fastest call (the least disturbed by other load)
	WeightBytes int64   `json:"weight_bytes"` // bytes of the weight as stored
	GBps        float64 `json:"weight_gb_per_s"`
	GFLOPs      float64 `json:"gflop_per_s"`
	OfCeiling   float64 `json:"of_read_ceiling"` // GBps / read ceiling
	OfPeak      float64 `json:"of_fp32_peak"`    // GFLOPs / peak
}

// MachineCPU is what a CPU benchmark is judged against, measured in the
// same run.
type MachineCPU struct {
	Threads      int     `json:"threads"`
	Level        string  `json:"simd_level"`
	ClockGHz     float64 `json:"clock_ghz"`
	PeakGFLOPs   float64 `json:"fp32_peak_gflop_per_s"`
	ReadCeilGBps float64 `json:"read_ceiling_gb_per_s"`
}

// ClockGHz estimates the core clock: a chain of dependent 64-bit integer
// multiplies (latency 3 cycles) timed on one goroutine, best of 5.
func ClockGHz() float64 {
	const n = 100_000_000
	best := 0.0
	for range 5 {
		t0 := time.Now()
		x := mulChain(n, 3)
		d := time.Since(t0).Seconds()
		runtime.KeepAlive(x)
		best = max(best, 3*n/d/1e9)
	}
	return best
}

//go:noinline
func mulChain(n int, x uint64) uint64 {
	for range n {
		x *= 0x9e3779b97f4a7c15
	}
	return x
}

// PeakFP32 returns the peak fp32 GFLOP/s of threads cores at clock GHz and
// the active SIMD level: 32 flops per cycle with AVX2 or AVX-512 (two FMA
// pipes of 8 lanes), 8 for scalar SSE code (two pipes, one lane, FMA as two
// ops in Go).
func PeakFP32(threads int, clockGHz float64) float64 {
	perCycle := 32.0
	if cpufeat.Active() == cpufeat.Generic {
		perCycle = 4
	}
	return float64(threads) * clockGHz * perCycle
}

// MeasureCPU measures the clock, the peak and the read ceiling for threads.
func MeasureCPU(threads int) MachineCPU {
	clk := ClockGHz()
	return MachineCPU{Threads: threads, Level: cpufeat.Active().String(), ClockGHz: clk,
		PeakGFLOPs: PeakFP32(threads, clk), ReadCeilGBps: ReadBandwidth(512<<20, threads, 5)}
}

// linearShapes are the distinct linear-layer shapes of c.
func linearShapes(c *model.Config) []LinearRowCPU {
	H, I := c.Hidden, c.Intermediate
	return []LinearRowCPU{
		{Layer: "q/o proj", N: c.Heads * c.HeadDim, K: H}, {Layer: "k/v proj", N: c.KVHeads * c.HeadDim, K: H},
		{Layer: "gate/up", N: I, K: H}, {Layer: "down", N: H, K: I}, {Layer: "lm_head", N: c.Vocab, K: H},
	}
}

// makeLinearWeight makes one [N, K] weight of format f on be from random
// values of std 0.02; it returns the weight and its stored bytes.
func makeLinearWeight(be *cpu.Backend, f string, N, K int, r *rand.Rand) (backend.Weight, int64, error) {
	vals := make([]float32, N*K)
	for i := range vals {
		vals[i] = float32(r.NormFloat64() * 0.02)
	}
	switch f {
	case "bf16", "fp16", "fp32":
		dt := map[string]backend.DType{"bf16": backend.BF16, "fp16": backend.F16, "fp32": backend.F32}[f]
		data := make([]byte, 0, N*K*dt.Size())
		for _, v := range vals {
			switch dt {
			case backend.BF16:
				h := half.BF16FromFloat32(v)
				data = append(data, byte(h), byte(h>>8))
			case backend.F16:
				h := half.FromFloat32(v)
				data = append(data, byte(h), byte(h>>8))
			default:
				b := math.Float32bits(v)
				data = append(data, byte(b), byte(b>>8), byte(b>>16), byte(b>>24))
			}
		}
		w, err := be.LoadWeightView("w", dt, []int{N, K}, data)
		return w, int64(len(data)), err
	case "int8":
		const G = 64
		q := make([]byte, N*K)
		for i := range q {
			q[i] = byte(int8(r.IntN(255) - 127))
		}
		sc := make([]byte, 2*N*K/G)
		for i := 0; i < len(sc); i += 2 {
			h := half.FromFloat32(0.02 / 40)
			sc[i], sc[i+1] = byte(h), byte(h>>8)
		}
		w, err := be.LoadInt8WeightView("w", []int{N, K}, q, sc, G)
		return w, int64(len(q) + len(sc)), err
	case "wq-int8", "wq-int4", "wq-int3":
		e := map[string]wq.Elem{"wq-int8": wq.Int8, "wq-int4": wq.Int4, "wq-int3": wq.Int3}[f]
		m, err := wq.Quantize(e, 128, N, K, vals)
		if err != nil {
			return nil, 0, err
		}
		w, err := be.LoadQuantWeight("w", m, nil)
		return w, m.Bytes(), err
	}
	return nil, 0, fmt.Errorf("bench: unknown weight format %q (have %v)", f, LinearFormats)
}

// cpuColdBytes is the working set that rotated weight copies must exceed to be
// read from DRAM: twice a 32 MiB last-level cache.
const cpuColdBytes = 64 << 20

// LinearCPU times Linear for every shape of c, format and T on threads
// goroutines (median of reps calls, after one warm-up call per copy).
func LinearCPU(c *model.Config, formats []string, Ts []int, threads, reps int, m MachineCPU, progress io.Writer) ([]LinearRowCPU, error) {
	be := cpu.New(threads)
	r := rand.New(rand.NewPCG(1, 2))
	var rows []LinearRowCPU
	for _, sh := range linearShapes(c) {
		for _, f := range formats {
			// Enough copies that a pass over them leaves the caches.
			var ws []backend.Weight
			var bytes int64
			for len(ws) == 0 || int64(len(ws))*bytes < cpuColdBytes {
				w, b, err := makeLinearWeight(be, f, sh.N, sh.K, r)
				if err != nil {
					return nil, err
				}
				ws, bytes = append(ws, w), b
				if len(ws) == 64 {
					break
				}
			}
			for _, T := range Ts {
				x, err := be.Alloc(backend.F32, T, sh.K)
				if err != nil {
					return nil, err
				}
				xv := make([]float32, T*sh.K)
				for i := range xv {
					xv[i] = float32(r.NormFloat64())
				}
				if err := be.Upload(x, xv); err != nil {
					return nil, err
				}
				y, err := be.Alloc(backend.F32, T, sh.N)
				if err != nil {
					return nil, err
				}
				for _, w := range ws {
					be.Linear(y, x, w, nil)
				}
				n := max(reps, len(ws))
				times := make([]float64, n)
				for i := range times {
					t0 := time.Now()
					be.Linear(y, x, ws[i%len(ws)], nil)
					times[i] = time.Since(t0).Seconds()
				}
				if err := be.Sync(); err != nil {
					return nil, err
				}
				be.Free(x)
				be.Free(y)
				sort.Float64s(times)
				med := times[len(times)/2]
				row := sh
				row.T, row.Format, row.WeightBytes, row.US, row.MinUS = T, f, bytes, med*1e6, times[0]*1e6
				row.GBps = float64(bytes) / med / 1e9
				row.GFLOPs = 2 * float64(T*sh.N*sh.K) / med / 1e9
				row.OfCeiling = row.GBps / m.ReadCeilGBps
				row.OfPeak = row.GFLOPs / m.PeakGFLOPs
				rows = append(rows, row)
				if progress != nil {
					fmt.Fprintf(progress, "%-9s %5dx%-5d %-8s T=%-4d %9.1f us (min %9.1f) %7.1f GB/s (%3.0f%% of read) %7.1f GFLOP/s (%3.0f%% of peak)\n",
						row.Layer, row.N, row.K, f, T, row.US, row.MinUS, row.GBps, 100*row.OfCeiling, row.GFLOPs, 100*row.OfPeak)
				}
			}
			for _, w := range ws {
				be.FreeWeight(w)
			}
		}
	}
	return rows, nil
}

// LoadCPU returns the median wall time of reps loads of the checkpoint in
// dir onto a CPU backend (Load to Close, the close excluded).
func LoadCPU(dir string, threads, reps int) (time.Duration, error) {
	var ts []time.Duration
	for range reps {
		be := cpu.New(threads)
		t0 := time.Now()
		m, err := model.Load(dir, be, model.LoadOptions{})
		if err != nil {
			return 0, err
		}
		ts = append(ts, time.Since(t0))
		m.Close()
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
	return ts[len(ts)/2], nil
}

// StepRowCPU is one whole decode step of StepCPU.
type StepRowCPU struct {
	KV           string  `json:"kv"`
	Context      int     `json:"context"`
	MsPerStep    float64 `json:"ms_per_step"`
	MinMsPerStep float64 `json:"min_ms_per_step"` // the fastest step (the least disturbed by other load)
	TokensPerSec float64 `json:"tokens_per_s"`
	LinearMs     float64 `json:"linear_ms"`    // Linear calls (all layers and the LM head)
	AttentionMs  float64 `json:"attention_ms"` // the KV cache's Attend
	OtherMs      float64 `json:"other_ms"`     // norms, RoPE, SwiGLU, adds, embedding, copies
	WeightBytes  int64   `json:"weight_bytes"` // stored bytes of every matrix read per step
	KVBytes      int64   `json:"kv_bytes"`     // KV bytes one step reads
	FloorMs      float64 `json:"floor_ms"`     // (weights + KV) / read ceiling
	OfFloor      float64 `json:"of_floor"`     // FloorMs / MsPerStep
	MinOfFloor   float64 `json:"min_of_floor"` // FloorMs / MinMsPerStep
	LinearOfRead float64 `json:"linear_of_read_ceiling"`
}

// stepWeightBytes is what one decode step reads of 16-bit weights: every
// layer's matrices and the LM head (a tied head is the embedding, read
// once; the embedding's one row per token is left out).
func stepWeightBytes(c *model.Config) int64 {
	H, I, qd, kvd := int64(c.Hidden), int64(c.Intermediate), int64(c.Heads*c.HeadDim), int64(c.KVHeads*c.HeadDim)
	perLayer := qd*H + 2*kvd*H + H*qd + 3*I*H
	return 2 * (int64(c.Layers)*perLayer + int64(c.Vocab)*H)
}

// timedBackend counts the time spent in Linear.
type timedBackend struct {
	*cpu.Backend
	linear time.Duration
}

func (b *timedBackend) Linear(dst, x backend.Tensor, w, bias backend.Weight) {
	t0 := time.Now()
	b.Backend.Linear(dst, x, w, bias)
	b.linear += time.Since(t0)
}

func (b *timedBackend) LinearGroup(dsts []backend.Tensor, x backend.Tensor, ws, biases []backend.Weight) {
	t0 := time.Now()
	b.Backend.LinearGroup(dsts, x, ws, biases)
	b.linear += time.Since(t0)
}

// randomKV is a model.Attention over attn caches that start with L random
// tokens per layer (realistic keys: channel offsets and outliers).
type randomKV struct {
	be     *cpu.Backend
	format kv.Format
	shape  attn.Shape
	caches []*attn.Cache
	time   time.Duration
	out    []float32
}

func newRandomKV(be *cpu.Backend, c *model.Config, spec kv.Spec, L int) (*randomKV, error) {
	f, err := spec.Resolve(c.HeadDim)
	if err != nil {
		return nil, err
	}
	a := &randomKV{be: be, format: f, shape: attn.Shape{Hq: c.Heads, Hkv: c.KVHeads, D: c.HeadDim}}
	r := rand.New(rand.NewPCG(5, 6))
	for range c.Layers {
		cache, err := attn.NewCache(f, a.shape)
		if err != nil {
			return nil, err
		}
		k, v := kvtest.KeysValues(r, L, c.KVHeads, c.HeadDim)
		if err := cache.Append(k, v); err != nil {
			return nil, err
		}
		a.caches = append(a.caches, cache)
	}
	return a, nil
}

// Attend implements model.Attention (one sequence, the caches' own).
func (a *randomKV) Attend(layer int, b *model.Batch, q, k, v, out backend.Tensor) error {
	t0 := time.Now()
	defer func() { a.time += time.Since(t0) }()
	qs, err1 := a.be.Float32s(q)
	ks, err2 := a.be.Float32s(k)
	vs, err3 := a.be.Float32s(v)
	os, err4 := a.be.Float32s(out)
	for _, err := range []error{err1, err2, err3, err4} {
		if err != nil {
			return err
		}
	}
	c := a.caches[layer]
	if err := c.Append(ks, vs); err != nil {
		return err
	}
	p := attn.Params{Format: a.format, Shape: a.shape, Tq: len(b.Tokens)}
	return attn.Decode(os, qs, []*attn.Seq{&c.Seq}, p)
}

// StepCPU loads the checkpoint in dir on threads goroutines and times steps
// decode steps (after 3 warm-up steps) with each KV spec at each context,
// median reported.
func StepCPU(dir string, specs []kv.Spec, contexts []int, threads, steps int, m MachineCPU, progress io.Writer) ([]StepRowCPU, error) {
	be := &timedBackend{Backend: cpu.New(threads)}
	mdl, err := model.Load(dir, be, model.LoadOptions{})
	if err != nil {
		return nil, err
	}
	defer mdl.Close()
	c := mdl.Config()
	wbytes := stepWeightBytes(c)
	var rows []StepRowCPU
	for _, sp := range specs {
		for _, L := range contexts {
			a, err := newRandomKV(be.Backend, c, sp, L)
			if err != nil {
				return nil, err
			}
			const warm = 3
			type sample struct{ total, lin, att time.Duration }
			var ss []sample
			for i := range warm + steps {
				var b model.Batch
				b.Add(0, L+i, int32((i*7919)%c.Vocab))
				be.linear, a.time = 0, 0
				t0 := time.Now()
				if _, err := mdl.Forward(&b, a); err != nil {
					return nil, err
				}
				if i >= warm {
					ss = append(ss, sample{time.Since(t0), be.linear, a.time})
				}
			}
			sort.Slice(ss, func(i, j int) bool { return ss[i].total < ss[j].total })
			med := ss[len(ss)/2]
			kvb := int64(c.Layers*c.KVHeads) * a.format.ReadBytes(L)
			row := StepRowCPU{KV: sp.String(), Context: L, MsPerStep: med.total.Seconds() * 1e3,
				LinearMs: med.lin.Seconds() * 1e3, AttentionMs: med.att.Seconds() * 1e3,
				WeightBytes: wbytes, KVBytes: kvb}
			row.TokensPerSec = 1e3 / row.MsPerStep
			row.OtherMs = row.MsPerStep - row.LinearMs - row.AttentionMs
			row.FloorMs = float64(wbytes+kvb) / (m.ReadCeilGBps * 1e9) * 1e3
			row.OfFloor = row.FloorMs / row.MsPerStep
			row.MinMsPerStep = ss[0].total.Seconds() * 1e3
			row.MinOfFloor = row.FloorMs / row.MinMsPerStep
			row.LinearOfRead = float64(wbytes) / (m.ReadCeilGBps * 1e9) * 1e3 / row.LinearMs
			rows = append(rows, row)
			if progress != nil {
				fmt.Fprintf(progress, "%-22s ctx %6d: %7.3f ms/step (%6.1f tok/s; min %.3f ms), linear %.3f ms (%.0f%% of its floor), attention %.3f ms, other %.3f ms; floor %.3f ms: %.0f%% (by the min %.0f%%)\n",
					row.KV, L, row.MsPerStep, row.TokensPerSec, row.MinMsPerStep, row.LinearMs, 100*row.LinearOfRead, row.AttentionMs, row.OtherMs, row.FloorMs, 100*row.OfFloor, 100*row.MinOfFloor)
			}
		}
	}
	return rows, nil
}
