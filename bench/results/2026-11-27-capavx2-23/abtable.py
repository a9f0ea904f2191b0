#!/usr/bin/env python3
"""abtable.py OUTDIR: BenchmarkDecodeSoftcap's minimum ms per binary, level, format, threads and cap."""
import glob, os, re, sys
t = {}
for f in glob.glob(os.path.join(sys.argv[1], "*.log")):
    b = re.match(r"(.+)-\d+\.log$", os.path.basename(f)).group(1)
    for line in open(f):
        m = re.match(r"BenchmarkDecodeSoftcap/(\w+)/(\w+)/cap=(\d+)(?:-(\d+))?\s+\d+\s+([\d.]+) ns/op", line)
        if m:
            lvl, fm, cap, thr, ns = m.groups()
            t.setdefault((lvl, thr or "1", fm, b, int(cap)), []).append(float(ns) / 1e6)
print("| level | threads | format | binary | cap 0 ms (min of n) | cap 50 ms | cap's cost |")
print("|---|---|---|---|---|---|---|")
for k in sorted({k[:4] for k in t}):
    a, c = t.get(k + (0,)), t.get(k + (50,))
    if a and c:
        print(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {min(a):.3f} ({len(a)}) | {min(c):.3f} ({len(c)}) | "
              f"{min(c)-min(a):+.3f} ms ({100*(min(c)/min(a)-1):+.1f}%) |")
