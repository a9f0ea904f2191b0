#!/usr/bin/env python3
"""table.py OUTDIR: min and median time (us) per binary, level, cap and format over the logs."""
import glob, os, re, statistics, sys
rows = {}
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.log"))):
    m = re.match(r"(.+)-(\w+)-cap(\d+)-(\d+)\.log$", os.path.basename(f))
    bin_, lvl, cap = m.group(1), m.group(2), int(m.group(3))
    for line in open(f):
        c = [x.strip() for x in line.split("|")]
        if len(c) > 6 and c[1][:2] in ("fp", "in") and "baseline" not in c[1]:
            rows.setdefault((bin_, lvl, c[1].split(":")[0], cap), []).append(float(c[5]))
keys = sorted({k[:3] for k in rows})
print("| binary | level | format | cap 0 min / median us | cap 50 min / median us | cost (min) | n |")
print("|---|---|---|---|---|---|---|")
for b, l, fm in keys:
    a, c = rows.get((b, l, fm, 0), []), rows.get((b, l, fm, 50), [])
    if not a or not c:
        continue
    print(f"| {b} | {l} | {fm} | {min(a):.0f} / {statistics.median(a):.0f} | {min(c):.0f} / {statistics.median(c):.0f} | "
          f"{min(c)-min(a):+.0f} us ({100*(min(c)/min(a)-1):+.1f}%) | {len(a)}+{len(c)} |")
