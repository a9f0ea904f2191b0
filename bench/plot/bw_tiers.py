"""Plot accuracy against bytes read for bit-plane (bw) tier mixes, the
BitWeaver seed's figures 9 and 10 redone on our model, from a
'bitdecode eval ppl --kv fp16,bw:...,... --json tiers.json' result: one line
per family (H2O eviction only: h+e; HIGH/MEDIUM: h+m(+e); HIGH/MEDIUM/LOW:
h+m+l), x = bytes read against an fp16 cache (measured), y = KL divergence
vs fp16 (left) and long-range reuse top-1 accuracy (right, if probed).

    python3 bench/plot/bw_tiers.py bench/results/2026-11-22-cpu-bw/tiers.json out.png

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


def main(src, dst):
    with open(src) as f:
        rep = json.load(f)
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
