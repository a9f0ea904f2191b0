import json,sys
def load(f):
    d=json.load(open(f)); out={}
    for s in d['shapes']:
        key='%dx%d'%(s['n'],s['k'])
        out[key]={'base':s['base_us'],'pts':{(p['k_chunk'],p['n_tb']):(p['step_us'],p['step_listed_us']) for p in s['points']}}
    return out
R={n:load(f'bench_dec_{n}.json') for n in ['v7_1','v7_2','main_1','main_2']}
shapes=list(R['v7_1'].keys())
for sh in shapes:
    print('##',sh,'base', ' / '.join('%.1f'%R[n][sh]['base'] for n in R))
    ks=sorted(set(k for k,_ in R['v7_1'][sh]['pts']))
    for k in ks:
        row=[]
        for n in R:
            pts={nt:v for (kk,nt),v in R[n][sh]['pts'].items() if kk==k}
            bs=min(v[0] for v in pts.values()); bl=min(v[1] for v in pts.values())
            row.append('%.1f/%.1f'%(bs,bl))
        print(' k',k,'sel/list best:', '  '.join(f'{n}={r}' for n,r in zip(R,row)))
    if len(sys.argv)>1:
        for (k,nt) in sorted(R['v7_1'][sh]['pts']):
            print('   k',k,'ntb',nt, '  '.join('%s=%.1f/%.1f'%(n,*R[n][sh]['pts'][(k,nt)]) for n in R))
