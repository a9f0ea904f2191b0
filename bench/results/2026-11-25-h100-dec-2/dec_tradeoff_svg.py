#!/usr/bin/env python3
"""DEC's perplexity-latency trade-off as an SVG, without matplotlib (this machine has none), with
the v4 costs (2026-11-25 afternoon, call2/) beside v3's (../2026-11-25-h100-dec/call3). Perplexity:
gocoder-23m heldout, ctx 2048, 2 windows, fp16 KV, on the H100 (DEC's bits did not change: int3
from ../2026-11-25-h100-dec/call3/ppl_gocoder_int3.json and ../2026-11-23-h100-dec/ppl_dec.json,
int4 from the latter). Latency: a Llama-3.1-8B-shape decode step, int4 KV, 1K context, B = 1, the
same k_chunk on every layer, residuals in device memory, the backend's default n_tb.

    python3 dec_tradeoff_svg.py > dec_tradeoff.svg
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "plot"))
from dec_tradeoff_svg import lat, ppl, render  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OLD = os.path.join(HERE, "..", "2026-11-23-h100-dec")
V3 = os.path.join(HERE, "..", "2026-11-25-h100-dec", "call3")


P = ppl(os.path.join(OLD, "ppl_dec.json"))
P.update(ppl(os.path.join(V3, "ppl_gocoder_int3.json")))
series = [
    ("int4 RTN, v3 (morning)", "int4:g128:rtn", lat(os.path.join(V3, "model_int4_device.json")), "#98df8a"),
    ("int3 RTN, v3 (morning)", "int3:g128:rtn", lat(os.path.join(V3, "model_int3_device.json")), "#ff9896"),
    ("int4 RTN, v4", "int4:g128:rtn", lat(os.path.join(HERE, "call2", "model_int4.json")), "#2ca02c"),
    ("int3 RTN, v4", "int3:g128:rtn", lat(os.path.join(HERE, "call2", "model_int3.json")), "#d62728"),
]
print(render('DEC on the H100: perplexity (gocoder-23m) against an 8B-shape decode step, one k_chunk on every layer, residual in device memory', series, P))
