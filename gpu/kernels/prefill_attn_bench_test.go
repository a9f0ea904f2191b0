package kernels_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/kv"
)

// BenchmarkPrefillAttention times one prefill chunk's attention the way
// kvcache/gpukv's Paged launches it: Tq = 512 new tokens (and 128 and 256
// for five formats: a prompt's short last chunk, where PrefillRoute's
// prefillMinRowsOf draws its lines; and 256-1024 at MHA's 32 KV heads, a row
// a token) at the end of a sequence of L tokens (the
// chunk's keys included; groups 2, 3 and 7 at Tq 128-512), one sequence, through
// prefill.cu (PlanPrefill) and through decode_mma.cu's prefill plan (the
// cache's before session 28: DecodeAuto, splits of 8192 tokens), for
// formats and head dims PrefillRoute sends to prefill.cu. The pool holds
// random fp16 bits (finite codes and pairs); times are medians of 20 runs
// after 3 (cuda.MedianUS). It prints one line per case. Run on the GPU
// machine:
//
//	./kernels.test -test.run '^$' -test.bench PrefillAttention -test.benchtime 1x
//
// envBenchPrefillCases, where set, keeps only the cases it names
// (comma-separated format/D/Tq/L, e.g. fp16/128/512/32768: one kernel to
// profile).
func BenchmarkPrefillAttention(b *testing.B) {
	d, ops := opsSetup(b)
	type bcase struct {
		spec            string
		hq, hkv, dd, tq int
	}
	var cases []bcase
	for _, spec := range []string{"fp16", "bf16", "int8", "int4", "int4:kt32:v32", "int2", "k4v2"} {
		cases = append(cases, bcase{spec, 32, 8, 128, 512})
	}
	for _, spec := range []string{"fp16", "int8", "int4"} {
		cases = append(cases, bcase{spec, 32, 8, 64, 512}, bcase{spec, 16, 8, 256, 512})
	}
	for _, tq := range []int{128, 256} {
		for _, spec := range []string{"fp16", "int8", "int4", "int2", "k4v2"} {
			cases = append(cases, bcase{spec, 32, 8, 128, tq})
		}
	}
	for _, tq := range []int{256, 512, 1024} { // MHA (group 1: Llama 2, Phi-3-mini): Tq rows a KV head
		for _, spec := range []string{"fp16", "int4", "int2"} {
			cases = append(cases, bcase{spec, 32, 32, 128, tq})
		}
	}
	// Groups 2 (Gemma 2 9B's 16/8), 3 (Llama 3.2 3B's 24/8) and 7 (Qwen2.5
	// 7B's 28/4): the grid behind prefillMinRowsOf's lines (a launch's rows).
	for _, h := range [][2]int{{16, 8}, {24, 8}, {28, 4}} {
		for _, tq := range []int{128, 256, 512} {
			for _, spec := range []string{"fp16", "int4", "int2", "k4v2"} {
				cases = append(cases, bcase{spec, h[0], h[1], 128, tq})
			}
		}
	}
	keep := map[string]bool{}
	if v := os.Getenv(envBenchPrefillCases); v != "" {
		for _, c := range strings.Split(v, ",") {
			keep[strings.TrimSpace(c)] = true
		}
	}
	fmt.Printf("prefill step %d (0: the tile), MT %d (0: the planner's); via fp16: the dequantizing route (LaunchDequant)\n%-16s %5s %4s %4s %6s %12s %12s %8s %12s %8s\n", tuning.Decode.PrefillStep, tuning.Decode.PrefillMT,
		"format", "heads", "D", "Tq", "L", "decode us", "prefill us", "speedup", "via fp16 us", "vs direct")
	for _, c := range cases {
		tq := c.tq
		lay, err := kernels.LayoutFor(kv.MustResolve(c.spec, c.dd).WithOrder(kv.MMA))
		if err != nil {
			b.Fatal(err)
		}
		for _, l := range []int{4096, 32768} {
			if len(keep) > 0 && !keep[fmt.Sprintf("%s/%d/%d/%d", c.spec, c.dd, tq, l)] {
				continue
			}
			nr := lay.Nr
			blocks := l / nr
			pool := benchAlloc(b, d, blocks*c.hkv*lay.BlockBytes+16)
			res := benchAlloc(b, d, 2*c.hkv*nr*c.dd*2)
			q := benchAlloc(b, d, tq*c.hq*c.dd*2)
			out := benchAlloc(b, d, tq*c.hq*c.dd*2)
			table := make([]int32, blocks)
			for i := range table {
				table[i] = int32(i)
			}
			tb := benchAlloc(b, d, 4*blocks)
			lens := benchAlloc(b, d, 4)
			if err := d.HtoD(tb, cuda.Bytes(table)); err != nil {
				b.Fatal(err)
			}
			if err := d.HtoD(lens, cuda.Bytes([]int32{int32(l)})); err != nil {
				b.Fatal(err)
			}
			err := d.Do(func(x *cuda.Ctx) error {
				if err := ops.FillNormalF16(x, d.Stream(), pool, (blocks*c.hkv*lay.BlockBytes)/2, 3, 1); err != nil {
					return err
				}
				if err := ops.FillNormalF16(x, d.Stream(), res, c.hkv*nr*c.dd*2, 4, 1); err != nil {
					return err
				}
				return ops.FillNormalF16(x, d.Stream(), q, tq*c.hq*c.dd, 5, 1)
			})
			if err != nil {
				b.Fatal(err)
			}
			bufs := kernels.DecodeBuffers{Pool: pool, BlockTable: tb, ResK: res, ResV: res + cuda.DevicePtr(c.hkv*nr*c.dd*2), Lens: lens, Q: q, Out: out}
			shape := kernels.DecodeShape{B: 1, Hq: c.hq, Hkv: c.hkv, Tq: tq, MaxBlocks: blocks, MaxL: l, SplitLen: (8192 + nr - 1) / nr * nr}
			dp, err := kernels.PlanDecodeWith(d, kernels.DecodeAuto, lay, shape, tuning.Decode)
			if err != nil {
				b.Fatal(err)
			}
			pp, err := kernels.PlanPrefill(d, lay, shape, tuning.Decode)
			if err != nil {
				b.Fatal(err)
			}
			time := func(launch func(x *cuda.Ctx) error) float64 {
				var us float64
				err := d.Do(func(x *cuda.Ctx) error {
					var err error
					us, err = x.MedianUS(d.Stream(), 3, 20, func(int) error { return launch(x) })
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
				return us
			}
			dus := time(func(x *cuda.Ctx) error { return dp.Launch(x, d.Stream(), bufs, 0) })
			pus := time(func(x *cuda.Ctx) error { return pp.Launch(x, d.Stream(), bufs, 0) })
			dp.Close()
			via := "           -        -"
			if pp.Dequantizes() {
				sc := kernels.PrefillScratch{Pool: benchAlloc(b, d, pp.ScratchBytes(blocks, c.hkv)), Table: tb}
				vus := time(func(x *cuda.Ctx) error { return pp.LaunchDequant(x, d.Stream(), bufs, shape, 0, sc) })
				via = fmt.Sprintf("%12.1f %8.2f", vus, pus/vus)
			}
			fmt.Printf("%-16s %5s %4d %4d %6d %12.1f %12.1f %8.2f %s\n", c.spec, fmt.Sprintf("%d/%d", c.hq, c.hkv), c.dd, tq, l, dus, pus, dus/pus, via)
		}
	}
}

// envBenchPrefillCases names BenchmarkPrefillAttention's cases to run
// (format/D/Tq/L, comma-separated; unset: all).
const envBenchPrefillCases = "BITDECODE_BENCH_PREFILL_CASES"
