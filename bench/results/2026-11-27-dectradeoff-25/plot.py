#!/usr/bin/env python3
"""DEC's perplexity-latency trade-off on session 25's tree (issue #22's plot, redone with the costs of
DEC inside v6.1, sessions 19-24): perplexity from `eval ppl` on the CPU (ppl.json: gocoder-23m heldout,
ctx 2048, 2 windows, fp16 KV), latency from `bench model` on the H100 (model_2.json: Llama-3.1-8B
shapes, 1K context, int4 KV, B = 1, residuals in device memory), one k_chunk on every layer and the
allocation by projection `half3`. The dashed lines: the half of int3 RTN's loss (PPL 9.0863) and the
5% budget over each format's step without DEC.

    python3 plot.py > dec_tradeoff.svg
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "plot"))
from dec_tradeoff_svg import by_projection, lat, ppl, render  # noqa: E402

HALF3 = by_projection({"down_proj": 16, "v_proj": 256, "o_proj": 32, "gate_proj": 32, "up_proj": 32})
I4, I3 = "int4:g128:rtn", "int3:g128:rtn"


def named(d):
    return {(f, "half3" if k == HALF3 else k): v for (f, k), v in d.items()}


P, L = named(ppl(os.path.join(HERE, "ppl.json"))), named(lat(os.path.join(HERE, "model_2.json")))
ks = lambda f, want: {k: v for k, v in L.items() if k[0] == f and isinstance(k[1], str) == want}
series = [
    ("int4 RTN, one k_chunk on every layer", I4, ks(I4, False), "#2ca02c"),
    ("int3 RTN, one k_chunk on every layer", I3, ks(I3, False), "#d62728"),
    ("int4 RTN, half3 (k by projection)", I4, ks(I4, True), "#1f77b4"),
    ("int3 RTN, half3 (k by projection)", I3, ks(I3, True), "#9467bd"),
]
half_loss = (P[("fp16", 0)] + P[(I3, 0)]) / 2
marks = [
    ("y", half_loss, "half of int3 RTN's loss back (%.4f)" % half_loss, "#555555"),
    ("x", L[(I4, 0)] * 1.05, "int4 +5%", "#2ca02c"),
    ("x", L[(I3, 0)] * 1.05, "int3 +5%", "#d62728"),
]
print(render("DEC on the H100 (session 25): perplexity (gocoder-23m) against an 8B-shape decode step, residuals in device memory",
             series, P, marks, x_from=2.4))
