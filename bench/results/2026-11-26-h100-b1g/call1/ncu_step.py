import csv, sys, re, collections
# usage: ncu_step.py file.csv -> per-kernel table of one full step (the last complete one between embedding_f16 launches)
rows=[]
for f in sys.argv[1:2]:
    lines=open(f).read().splitlines()
    start=[i for i,l in enumerate(lines) if l.startswith('"ID"')]
    if not start: print("no csv"); sys.exit(1)
    for r in csv.DictReader(lines[start[0]:]):
        if r.get("Metric Name")!="gpu__time_duration.sum": continue
        v=float(r["Metric Value"].replace(",",""))
        unit=r["Metric Unit"]; us=v/1000 if unit=="ns" else v*1000 if unit=="ms" else v
        name=r["Kernel Name"]; name=re.sub(r"\(.*","",name) if not name.startswith("void") else re.sub(r"^void ","",re.sub(r"\(.*$","",name))
        rows.append((name,us,r["Grid Size"],r["Block Size"]))
emb=[i for i,r in enumerate(rows) if r[0].startswith("embedding")]
steps=[(emb[i],emb[i+1]) for i in range(len(emb)-1)]
print(f"{len(rows)} kernels, {len(steps)} complete steps")
for a,b in steps[-1:]:
    agg=collections.OrderedDict()
    for name,us,g,bl in rows[a:b]:
        k=(name,g,bl)
        c,t=agg.get(k,(0,0.0)); agg[k]=(c+1,t+us)
    tot=sum(us for _,us,_,_ in rows[a:b])
    print(f"step: {b-a} kernels, {tot/1000:.3f} ms of kernel time")
    for (name,g,bl),(c,t) in sorted(agg.items(), key=lambda kv:-kv[1][1]):
        print(f"| {name[:60]} | {g} | {bl} | {c} | {t/c:.2f} | {t:.1f} |")
