#!/usr/bin/env python3
"""PyTorch SDPA fp16 decode attention: the anchor bitdecode's GPU table is compared against.

Protocol (shared BENCHMARKS.md): one decode step, fp16 Q reshaped to
[B, Hkv, Hq/Hkv, D] (the query transformation, no mask), K/V [B, Hkv, L, D],
torch.nn.functional.scaled_dot_product_attention with the FLASH backend, and
CUDNN where it runs. CUDA events around each call, 5 warm-ups, median of 50,
inputs rotated among enough copies that the working set exceeds L2. Each
timed call is queued behind a 200 us torch.cuda._sleep, so the events measure
GPU time, not Python's launch latency: the same method as bitdecode's
cuda.Ctx.MedianUS (docs/perf/gemvq.md, "Timing method").

    python3 bench/anchors/sdpa_decode.py --json sdpa.json [--grid 1x8192,8x32768]

Writes a JSON list of {B, L, Hq, Hkv, D, flash_us, cudnn_us, best_us, max_abs_err}
that `bitdecode bench attn --device cuda --anchor sdpa.json` merges into its table.
"""
import argparse
import json
import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

GRID = [(1, 8192), (1, 32768), (1, 131072), (8, 32768), (16, 32768), (32, 8192), (64, 8192), (128, 8192)]
ROTATE_BYTES = 256 << 20
WARMUP, RUNS = 5, 50
SLEEP_CYCLES = 400_000  # ~200 us at the H100's 1.98 GHz boost clock


def time_backend(backend, qs, ks, vs):
    times = []
    with sdpa_kernel([backend]):
        for i in range(WARMUP + RUNS):
            j = i % len(qs)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(SLEEP_CYCLES)
            start.record()
            out = F.scaled_dot_product_attention(qs[j], ks[j], vs[j])
            end.record()
            end.synchronize()
            if i >= WARMUP:
                times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times), out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", required=True)
    ap.add_argument("--grid", default="")
    ap.add_argument("--hq", type=int, default=32)
    ap.add_argument("--hkv", type=int, default=8)
    ap.add_argument("--d", type=int, default=128)
    a = ap.parse_args()
    grid = GRID
    if a.grid:
        grid = [tuple(int(x) for x in p.lower().split("x")) for p in a.grid.split(",")]
    torch.manual_seed(0)
    g = a.hq // a.hkv
    recs = []
    for B, L in grid:
        kv_bytes = 2 * B * a.hkv * L * a.d * 2
        copies = max(1, -(-ROTATE_BYTES // kv_bytes))
        qs = [torch.randn(B, a.hkv, g, a.d, device="cuda", dtype=torch.float16) for _ in range(copies)]
        ks = [torch.randn(B, a.hkv, L, a.d, device="cuda", dtype=torch.float16) for _ in range(copies)]
        vs = [torch.randn(B, a.hkv, L, a.d, device="cuda", dtype=torch.float16) for _ in range(copies)]
        rec = {"B": B, "L": L, "Hq": a.hq, "Hkv": a.hkv, "D": a.d, "flash_us": 0.0, "cudnn_us": 0.0}
        flash_out = None
        for name, be in (("flash_us", SDPBackend.FLASH_ATTENTION), ("cudnn_us", SDPBackend.CUDNN_ATTENTION)):
            try:
                rec[name], out = time_backend(be, qs, ks, vs)
                if flash_out is None:
                    flash_out = out
            except Exception as e:  # backend not available for this shape
                print(f"  {name[:-3]} unavailable at B={B} L={L}: {str(e).splitlines()[0][:120]}")
        # Check the last call against float64 on the copy it used.
        j = (WARMUP + RUNS - 1) % copies
        ref = F.scaled_dot_product_attention(qs[j].double(), ks[j].double(), vs[j].double())
        rec["max_abs_err"] = float((flash_out.double() - ref).abs().max()) if flash_out is not None else -1.0
        rec["best_us"] = min(t for t in (rec["flash_us"], rec["cudnn_us"]) if t > 0)
        gbps = kv_bytes / rec["best_us"] / 1e3
        print(f"SDPA fp16 B={B:<4} L={L:<7} flash {rec['flash_us']:8.1f} us  cudnn {rec['cudnn_us']:8.1f} us  best {gbps:6.0f} GB/s  err {rec['max_abs_err']:.1e}", flush=True)
        recs.append(rec)
        del qs, ks, vs
        torch.cuda.empty_cache()
    with open(a.json, "w") as f:
        json.dump(recs, f, indent=1)


if __name__ == "__main__":
    main()
