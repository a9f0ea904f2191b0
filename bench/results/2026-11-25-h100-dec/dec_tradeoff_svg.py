#!/usr/bin/env python3
"""DEC's perplexity-latency trade-off as an SVG, without matplotlib (this machine has none):
bench/plot/dec_tradeoff.py's figure redone with the 2026-11-25 costs. Perplexity: gocoder-23m
heldout, ctx 2048, 2 windows, fp16 KV, on the H100 (int3: call3/ppl_gocoder_int3.json; int4:
bench/results/2026-11-23-h100-dec/ppl_dec.json). Latency: a Llama-3.1-8B-shape decode step, int4
KV, 1K context, B = 1, the same k_chunk on every layer (call2/model_int4.json, call3/model_*_device.json,
2026-11-23 model_dec.json for serial mode).

    python3 dec_tradeoff_svg.py > dec_tradeoff.svg
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "plot"))
from dec_tradeoff_svg import lat, ppl, render  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OLD = os.path.join(HERE, "..", "2026-11-23-h100-dec")


P = ppl(os.path.join(OLD, "ppl_dec.json"))
P.update(ppl(os.path.join(HERE, "call3", "ppl_gocoder_int3.json")))
series = [
    ("int4 RTN, serial (2026-11-23)", "int4:g128:rtn", lat(os.path.join(OLD, "model_dec.json")), "#999999"),
    ("int3 RTN, serial (2026-11-23)", "int3:g128:rtn", lat(os.path.join(OLD, "model_dec.json")), "#cccccc"),
    ("int4 RTN, fused, residual in host memory", "int4:g128:rtn", lat(os.path.join(HERE, "call2", "model_int4.json")), "#1f77b4"),
    ("int4 RTN, fused, residual in device memory", "int4:g128:rtn", lat(os.path.join(HERE, "call3", "model_int4_device.json")), "#2ca02c"),
    ("int3 RTN, fused, residual in device memory", "int3:g128:rtn", lat(os.path.join(HERE, "call3", "model_int3_device.json")), "#d62728"),
]
print(render('DEC on the H100: perplexity (gocoder-23m) against an 8B-shape decode step, one k_chunk on every layer', series, P))
