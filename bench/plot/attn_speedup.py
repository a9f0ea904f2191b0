"""Plot decode-attention speedup over PyTorch SDPA (fp16) against context,
one line per KV format and batch size, from a 'bitdecode bench attn
--device cuda --anchor sdpa.json --json gpu_attn.json' result.

    python3 bench/plot/attn_speedup.py bench/results/DIR/gpu_attn.json out.png

Needs matplotlib (present on the GPU machine; bench results are plotted
there or anywhere matplotlib is installed).
"""
import json
import sys
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def label(spec):
    """The spec without its residual size: 'int4:kt128:v128:res128' -> 'int4:kt128:v128'."""
    return ":".join(p for p in spec.split(":") if not p.startswith("res"))


def main(src, dst):
    with open(src) as f:
        rep = json.load(f)
    rows = [r for r in rep["rows"] if r.get("speedup_vs_sdpa")]
    fmts = []
    for r in rows:
        f = label(r["format"])
        if f not in fmts:
            fmts.append(f)
    points = sorted({(r["B"], r["L"]) for r in rows}, key=lambda p: (p[0] * p[1], p[0]))
    speed = {(label(r["format"]), r["B"], r["L"]): r["speedup_vs_sdpa"] for r in rows}
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.5), gridspec_kw={"width_ratios": [1, 2]})
    # Left: batch 1, speedup against context.
    for f in fmts:
        pts = sorted((l, speed[(f, b, l)]) for (b, l) in points if b == 1 and (f, b, l) in speed)
        if pts:
            ax1.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f)
    ax1.axhline(1.0, color="gray", lw=0.8, ls="--")
    ax1.set_xscale("log", base=2)
    ax1.set_xlabel("context (tokens), batch 1")
    ax1.set_ylabel("speedup vs PyTorch SDPA fp16")
    ax1.grid(alpha=0.3)
    ax1.legend(fontsize=8)
    # Right: every grid point, grouped bars.
    width = 0.8 / len(fmts)
    for i, f in enumerate(fmts):
        xs = [j + (i - (len(fmts) - 1) / 2) * width for j in range(len(points))]
        ax2.bar(xs, [speed.get((f, b, l), 0) for (b, l) in points], width, label=f)
    ax2.axhline(1.0, color="gray", lw=0.8, ls="--")
    ax2.set_xticks(range(len(points)))
    ax2.set_xticklabels([f"{b}x{l // 1024}K" for (b, l) in points])
    ax2.set_xlabel("batch x context")
    ax2.grid(alpha=0.3, axis="y")
    fig.suptitle(f"bitdecode decode attention, Hq=32 Hkv=8 D=128, {rep.get('device', '')} ({rep.get('date', '')})", fontsize=10)
    fig.tight_layout()
    fig.savefig(dst, dpi=120)
    print(f"wrote {dst}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
