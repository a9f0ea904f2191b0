import csv, sys, re, collections
# usage: ncu_step.py file.csv -> per-kernel table of the last complete step (between
# embedding_f16 launches) of each run of steps with the same kernels (one per bench config)
rows=[]
lines=open(sys.argv[1]).read().splitlines()
start=[i for i,l in enumerate(lines) if l.startswith('"ID"')]
if not start: print("no csv"); sys.exit(1)
for r in csv.DictReader(lines[start[0]:]):
    if r.get("Metric Name")!="gpu__time_duration.sum": continue
    v=float(r["Metric Value"].replace(",",""))
    unit=r["Metric Unit"]; us=v/1000 if unit in("ns","nsecond") else v*1000 if unit in("ms","msecond") else v
    name=r["Kernel Name"]; name=re.sub(r"\(.*","",name) if not name.startswith("void") else re.sub(r"^void ","",re.sub(r"\(.*$","",name))
    rows.append((name,us,r["Grid Size"],r["Block Size"]))
emb=[i for i,r in enumerate(rows) if r[0].startswith("embedding")]
steps=[(emb[i],emb[i+1]) for i in range(len(emb)-1)]
print(f"{len(rows)} kernels, {len(steps)} complete steps")
def sig(a,b): return tuple(sorted(collections.Counter((n,g) for n,_,g,_ in rows[a:b]).items()))
groups=[]
for a,b in steps:
    s=sig(a,b)
    if groups and groups[-1][0]==s: groups[-1][1].append((a,b))
    else: groups.append((s,[(a,b)]))
for s,st in groups:
    if len(st)<2: continue
    a,b=st[-1]
    agg=collections.OrderedDict()
    for name,us,g,bl in rows[a:b]:
        k=(name,g,bl); c,t=agg.get(k,(0,0.0)); agg[k]=(c+1,t+us)
    tot=sum(us for _,us,_,_ in rows[a:b])
    att=[n for (n,g,bl) in agg if "decode" in n or "wg::" in n or "mma" in n]
    print(f"\n## step of {len(st)} alike ({att[:2]}): {b-a} kernels, {tot/1000:.3f} ms of kernel time; the other steps: "+", ".join(f"{sum(us for _,us,_,_ in rows[x:y])/1000:.3f}" for x,y in st[:-1]))
    print("| kernel | grid | block | count | us each | us a step |\n|---|---|---|---|---|---|")
    for (name,g,bl),(c,t) in sorted(agg.items(), key=lambda kv:-kv[1][1]):
        print(f"| {name[:70]} | {g} | {bl} | {c} | {t/c:.2f} | {t:.1f} |")
