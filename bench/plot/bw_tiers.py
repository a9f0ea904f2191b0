"""Plots of bit-plane (bw) tier mixes, from either of two JSON results.

Accuracy (a 'bitdecode eval ppl --kv fp16,bw:...,... --json tiers.json'
result): the BitWeaver seed's figures 9 and 10 redone on our model, one line
per family (H2O eviction only: h+e; HIGH/MEDIUM: h+m(+e); HIGH/MEDIUM/LOW:
h+m+l), x = bytes read against an fp16 cache (measured), y = KL divergence
vs fp16 (left) and long-range reuse top-1 accuracy (right, if probed).

Speed (a 'bitdecode bench attn --device cuda --kv bw:...,... --json bw.json'
result): one panel per batch size, x = context, y = the planes kernel's
speedup over the fp16 decode kernel measured in the same run, one line per
tier mix, with the bytes-bound ideal (fp16 bytes / bytes read) dotted.

    python3 bench/plot/bw_tiers.py bench/results/2026-11-22-cpu-bw/tiers.json out.png
    python3 bench/plot/bw_tiers.py bw.json bw_speed.png

Needs matplotlib (present on the GPU machine).
"""
import json
import sys
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def shares(spec):
    """'bw:h10:m30:l60:...' -> {'h': 10, 'm': 30, 'l': 60, 'e': 0}."""
    out = {"h": 0, "m": 0, "l": 0, "e": 0}
    for p in spec.split(":")[1:]:
        if p[:1] in out and p[1:].isdigit():
            out[p[:1]] = int(p[1:])
    return out


def family(spec):
    s = shares(spec)
    if s["l"] > 0:
        return "HIGH/MEDIUM/LOW"
    if s["m"] > 0:
        return "HIGH/MEDIUM (+evict)"
    return "H2O eviction only"


def mix(spec):
    """'bw:h20:m40:l40:w64:s4:r16:blk64' -> 'h20:m40:l40' (plus w/s when not the defaults)."""
    keep = []
    for p in spec.split(":")[1:]:
        if p[:1] in "hmle" and p[1:].isdigit() and int(p[1:]) > 0:
            keep.append(p)
        elif p in ("w0", "s0", "bf16", "nofilter") or p.startswith("a8=") or p.startswith("a4="):
            keep.append(p)
    return ":".join(keep) or spec


def speed(rep, dst):
    rows = [r for r in rep["rows"] if r.get("planes") and r.get("speedup_vs_fp16")]
    if not rows:
        sys.exit("no bw rows with an fp16 time in this report")
    batches = sorted({r["B"] for r in rows})
    mixes = []
    for r in rows:
        m = mix(r["format"])
        if m not in mixes:
            mixes.append(m)
    fig, axes = plt.subplots(1, len(batches), figsize=(4.2 * len(batches), 4.2), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, b in zip(axes[0], batches):
        for i, m in enumerate(mixes):
            pts = sorted((r["L"], r["speedup_vs_fp16"], 1 / r["planes"]["read_vs_fp16"])
                         for r in rows if r["B"] == b and mix(r["format"]) == m)
            if not pts:
                continue
            c = colors[i % len(colors)]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", color=c, label=f"{m} ({rows[0]['kernel']})")
            ax.plot([p[0] for p in pts], [p[2] for p in pts], ls=":", color=c, lw=1)
        ax.axhline(1.0, color="gray", lw=0.8, ls="--")
        ax.set_xscale("log", base=2)
        ax.set_xlabel(f"context (tokens), batch {b}")
        ax.set_ylabel("speedup vs the fp16 kernel")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    r0 = rows[0]
    fig.suptitle(f"bit-plane decode attention, Hq={r0['Hq']} Hkv={r0['Hkv']} D={r0['D']}, "
                 f"{rep.get('device', '')} ({rep.get('date', '')}); dotted: bytes-bound ideal", fontsize=10)
    fig.tight_layout()
    fig.savefig(dst, dpi=130)
    print(f"wrote {dst}")


def main(src, dst):
    with open(src) as f:
        rep = json.load(f)
    if "rows" in rep:
        return speed(rep, dst)
    rows = [r for r in rep["results"] if r["kv"].startswith("bw")]
    base = rep["results"][0]
    probes = base.get("probes", 0) > 0
    fig, axes = plt.subplots(1, 2 if probes else 1, figsize=(12 if probes else 6.5, 4.5), squeeze=False)
    fams = {}
    for r in rows:
        fams.setdefault(family(r["kv"]), []).append(r)
    for name, rs in fams.items():
        rs.sort(key=lambda r: r["read_vs_fp16"])
        xs = [100 * r["read_vs_fp16"] for r in rs]
        axes[0][0].plot(xs, [r["kld_vs_baseline"] for r in rs], marker="o", label=name)
        if probes:
            axes[0][1].plot(xs, [100 * r["probe_top1"] for r in rs], marker="o", label=name)
    axes[0][0].set_yscale("log")
    axes[0][0].set_xlabel("bytes read vs fp16 cache (%)")
    axes[0][0].set_ylabel("KL divergence vs fp16 (nats/token)")
    axes[0][0].grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    if probes:
        axes[0][1].axhline(100 * base["probe_top1"], color="gray", ls="--", lw=0.8, label="fp16")
        axes[0][1].set_xlabel("bytes read vs fp16 cache (%)")
        axes[0][1].set_ylabel("reuse top-1 accuracy (%%), %d probes" % base["probes"])
        axes[0][1].grid(alpha=0.3)
        axes[0][1].legend(fontsize=8)
    fig.suptitle("gocoder-23m, heldout.txt, ctx %d: tier mixes at equal traffic" % rep["ctx"])
    fig.tight_layout()
    fig.savefig(dst, dpi=130)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: bw_tiers.py TIERS.json OUT.png")
    main(sys.argv[1], sys.argv[2])
