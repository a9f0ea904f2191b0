#!/usr/bin/env python3
"""DEC's trade-off (issue #9, the DecDEC seed's end-to-end figure): perplexity against decode
latency, per weight format, one point per DEC k_chunk.

Perplexity comes from the reference checkpoint (gocoder-23m, `bitdecode eval ppl --device cuda
--weights ... --dec-k ... --json ppl.json`); latency from Llama-3.1-8B shapes with random weights
of the same formats and the same k_chunk on every layer (`bitdecode bench model --weights ...
--dec-k ... --json model.json`), both on the same GPU. The two models differ: the plot pairs
one model's accuracy with the other's speed at equal DEC settings, which is what a user
choosing k_chunk for an 8B model on this GPU needs from each.

    python3 bench/plot/dec_tradeoff.py ppl.json model.json out.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# The readers of eval ppl's and bench model's JSON ({(format, k_chunk): value},
# fixed k_chunk rows only) are the SVG script's, beside this one.
from dec_tradeoff_svg import lat as latency_points, ppl as ppl_points  # noqa: E402


def main(ppl_path, model_path, png):
    ppl = ppl_points(ppl_path)
    lat = latency_points(model_path)
    device = json.load(open(model_path))["device"]
    # GPTQ stores the RTN format (same codes layout, same kernels): its
    # latency is RTN's.
    for (f, k), v in list(lat.items()):
        if f.endswith(":rtn"):
            lat.setdefault((f[: -len(":rtn")] + ":gptq", k), v)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    formats = sorted({f for f, _ in ppl if (f, 0) in lat}, key=lambda f: -lat[(f, 0)])
    for f in formats:
        ks = sorted(k for (g, k) in ppl if g == f and (g, k) in lat)
        xs = [lat[(f, k)] for k in ks]
        ys = [ppl[(f, k)] for k in ks]
        ax.plot(xs, ys, marker="o", label=f, linestyle="--" if f.endswith("gptq") else "-")
        for x, y, k in zip(xs, ys, ks):
            ax.annotate("no DEC" if k == 0 else f"k={k}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.set_xlabel(f"decode ms/token, Llama-3.1-8B shapes, B=1, 1K context ({device})")
    ax.set_ylabel("perplexity, gocoder-23m heldout (ctx 2048)")
    ax.set_title("DEC: perplexity against latency (one k_chunk on every layer)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=130)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: dec_tradeoff.py PPL.json MODEL.json OUT.png")
    main(*sys.argv[1:])
