import csv, sys, re, collections
# usage: ncu_step.py file.csv -> per-kernel table of the last complete step (between embedding launches):
# each kernel (name, grid) with its launches, us per launch and in all, DRAM bytes read+written and GB/s.
lines = open(sys.argv[1]).read().splitlines()
start = [i for i, l in enumerate(lines) if l.startswith('"ID"')]
if not start:
    print("no csv"); sys.exit(1)
scale = {"ns": 1e-3, "usecond": 1, "us": 1, "msecond": 1e3, "ms": 1e3, "nsecond": 1e-3,
         "byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "KB": 1e3, "MB": 1e6, "GB": 1e9}
k = collections.OrderedDict()
for r in csv.DictReader(lines[start[0]:]):
    i = int(r["ID"])
    name = r["Kernel Name"]
    name = re.sub(r"^void ", "", name); name = re.sub(r"[(<].*$", "", name)
    e = k.setdefault(i, {"name": name, "grid": r["Grid Size"], "block": r["Block Size"], "us": 0.0, "bytes": 0.0})
    v = float(r["Metric Value"].replace(",", "") or 0)
    u = r["Metric Unit"]
    if r["Metric Name"] == "gpu__time_duration.sum":
        e["us"] = v * scale.get(u, 1e-3)
    elif r["Metric Name"].startswith("dram__bytes"):
        e["bytes"] += v * scale.get(u, 1)
rows = list(k.values())
emb = [i for i, r in enumerate(rows) if r["name"].startswith("embedding")]
print(f"{len(rows)} kernels, {len(emb)} embedding launches, {max(len(emb)-1,0)} complete steps")
for a, b in [(emb[i], emb[i+1]) for i in range(len(emb)-1)][-1:]:
    agg = collections.OrderedDict()
    for r in rows[a:b]:
        key = (r["name"], r["grid"], r["block"])
        c = agg.setdefault(key, [0, 0.0, 0.0]); c[0] += 1; c[1] += r["us"]; c[2] += r["bytes"]
    tot = sum(r["us"] for r in rows[a:b]); totb = sum(r["bytes"] for r in rows[a:b])
    print(f"step: {b-a} kernels, {tot/1000:.3f} ms of kernel time, {totb/1e9:.2f} GB of DRAM traffic")
    print("| kernel | grid | block | launches | us each | us in all | MB each | GB/s |")
    print("|---|---|---|---|---|---|---|---|")
    for (n, g, bl), (c, t, by) in sorted(agg.items(), key=lambda kv: -kv[1][1]):
        print(f"| {n[:56]} | {g} | {bl} | {c} | {t/c:.2f} | {t:.1f} | {by/c/1e6:.2f} | {by/t/1e3 if t else 0:.0f} |")
    byname = collections.OrderedDict()
    for (n, g, bl), (c, t, by) in agg.items():
        d = byname.setdefault(n, [0, 0.0]); d[0] += c; d[1] += t
    print("\nby name: | kernel | launches | us in all | share |")
    for n, (c, t) in sorted(byname.items(), key=lambda kv: -kv[1][1]):
        print(f"| {n[:56]} | {c} | {t:.1f} | {100*t/tot:.1f}% |")
    print("\nlaunch order of the first layer's kernels and the tail:")
    for r in rows[a:a+16] + [{"name": "...", "grid": "", "us": 0, "bytes": 0}] + rows[b-8:b]:
        print(f"  {r['name'][:50]} {r['grid']} {r['us']:.2f} us {r['bytes']/1e6:.2f} MB")
