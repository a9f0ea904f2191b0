"""The SVG form of DEC's perplexity-latency trade-off (bench/plot/dec_tradeoff.py's figure) for
machines without matplotlib: the readers of `bitdecode eval ppl` and `bench model` JSON, and the
renderer. The scripts under bench/results/*-h100-dec*/ call it with their own series.
"""
import json


def by_projection(ks):
    """The key of a k_chunk by projection ({name: k}): its non-zero entries as "name:k", sorted and
    joined by "+", the same whether `eval ppl` (a map) or `bench model` (a string) wrote it."""
    return "+".join(f"{n}:{k}" for n, k in sorted(ks.items()) if k)


def ppl(path):
    """{(weights format, k): PPL} of an `eval ppl` JSON; k an int, or by_projection's string."""
    out = {}
    for r in json.load(open(path))["results"]:
        w = r["weights"]
        if "dec_k_chunk_per_shape" in w:
            continue
        if "dec_k_chunk_per_layer" in w:
            out[(w["format"], by_projection(w["dec_k_chunk_per_layer"]))] = r["ppl"]
            continue
        out[(w["format"], w.get("dec_k_chunk", 0))] = r["ppl"]
    return out


def lat(path):
    """{(weights format, k): ms per step} of a `bench model` JSON, keyed as ppl()'s."""
    out = {}
    for r in json.load(open(path))["rows"]:
        dec = r.get("dec", "")
        if dec.startswith("tuned"):
            continue
        if ":" in dec:
            k = by_projection({n: int(v) for n, v in (e.split(":") for e in dec.split("+"))})
        else:
            k = int(dec or 0)
        out[(r["weights"], k)] = r["ms_per_step"]
    return out


def render(title, series, P, marks=(), x_from=None):
    """Returns the SVG of series, each (name, weights format, lat() of a run, colour), with the
    perplexities P of ppl(). A k that is a string (an allocation by projection, such as "half3")
    is its own label. marks are dashed reference lines, each ("x" or "y", value, label, colour).
    x_from starts the latency axis there (ticks every 0.2 ms) instead of at 0 (every 2 ms)."""
    pts = []
    for name, f, L, col in series:
        xs = sorted((L[(g, k)], P[(f, k)], k) for (g, k) in L if g == f and (f, k) in P)
        pts.append((name, col, xs))
    allx = [x for _, _, s in pts for x, _, _ in s]
    ally = [y for _, _, s in pts for _, y, _ in s]
    W, H, M = 760, 460, 70
    x0, x1 = (0, max(allx) * 1.05) if x_from is None else (x_from, max(allx) + 0.05 * (max(allx) - x_from))
    y0, y1 = min(ally) - 0.05, max(ally) + 0.05
    sx = lambda x: M + (x - x0) / (x1 - x0) * (W - 2 * M)
    sy = lambda y: H - M - (y - y0) / (y1 - y0) * (H - 2 * M)
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">',
         f'<rect width="{W}" height="{H}" fill="white"/>',
         f'<text x="{W/2}" y="20" text-anchor="middle" font-size="13">{title}</text>',
         f'<line x1="{M}" y1="{H-M}" x2="{W-M}" y2="{H-M}" stroke="black"/><line x1="{M}" y1="{M}" x2="{M}" y2="{H-M}" stroke="black"/>',
         f'<text x="{W/2}" y="{H-25}" text-anchor="middle">decode ms/step, Llama-3.1-8B shapes, 1K context, int4 KV, B = 1</text>',
         f'<text x="18" y="{H/2}" transform="rotate(-90 18 {H/2})" text-anchor="middle">perplexity, heldout, ctx 2048</text>']
    ticks = range(0, int(x1) + 1, 2) if x_from is None else [round(x0 + 0.2 * i, 1) for i in range(int((x1 - x0) / 0.2) + 1)]
    for t in ticks:
        o.append(f'<line x1="{sx(t)}" y1="{H-M}" x2="{sx(t)}" y2="{H-M+4}" stroke="black"/><text x="{sx(t)}" y="{H-M+16}" text-anchor="middle">{t}</text>')
    yt = y0
    while yt <= y1:
        o.append(f'<line x1="{M-4}" y1="{sy(yt)}" x2="{M}" y2="{sy(yt)}" stroke="black"/><text x="{M-6}" y="{sy(yt)+4}" text-anchor="end">{yt:.1f}</text>')
        yt += 0.2
    for i, (name, col, s) in enumerate(pts):
        if not s:
            continue
        o.append('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>' % (col, " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y, _ in s)))
        for x, y, k in s:
            label = k if isinstance(k, str) else "no DEC" if k == 0 else "k=%d" % k
            o.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3.5" fill="{col}"/><text x="{sx(x)+5:.1f}" y="{sy(y)-5:.1f}" fill="{col}">{label}</text>')
        o.append(f'<rect x="{W-M-290}" y="{M+8+16*i}" width="12" height="4" fill="{col}"/><text x="{W-M-272}" y="{M+13+16*i}">{name}</text>')
    for axis, v, label, col in marks:
        if axis == "x":
            o.append(f'<line x1="{sx(v):.1f}" y1="{M}" x2="{sx(v):.1f}" y2="{H-M}" stroke="{col}" stroke-dasharray="4 3"/><text x="{sx(v)+3:.1f}" y="{M+10}" fill="{col}">{label}</text>')
        else:
            o.append(f'<line x1="{M}" y1="{sy(v):.1f}" x2="{W-M}" y2="{sy(v):.1f}" stroke="{col}" stroke-dasharray="4 3"/><text x="{M+4}" y="{sy(v)-4:.1f}" fill="{col}">{label}</text>')
    o.append("</svg>")
    return "\n".join(o)
