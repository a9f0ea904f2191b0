import json,glob,sys,os
# best n_tb per (variant, shape, k): selecting and list given, each against its run's base
files=sys.argv[1:]
short={'q_proj/o_proj':'q/o','k_proj/v_proj':'k/v','gate_proj/up_proj':'gate/up','down_proj':'down'}
for f in files:
    d=json.load(open(f)); tag=os.path.basename(f)[len('bench_dec_'):-5]
    for s in d['shapes']:
        b=s['base_us']; out=[]
        ks=sorted(set(p['k_chunk'] for p in s['points']))
        for k in ks:
            ps=[p for p in s['points'] if p['k_chunk']==k]
            sel=min(ps,key=lambda p:p['step_us']); lst=min(ps,key=lambda p:p.get('step_listed_us',1e9))
            out.append("k%d sel %.1f(+%.0f%%,tb%d) list %.1f(+%.0f%%,tb%d)"%(k,sel['step_us'],100*(sel['step_us']/b-1),sel['n_tb'],lst['step_listed_us'],100*(lst['step_listed_us']/b-1),lst['n_tb']))
        print("%-9s %-8s base %5.1f | %s"%(tag,short[s['name']],b," | ".join(out)))
