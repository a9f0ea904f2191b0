import json,sys
def load(f):
    d=json.load(open(f)); out={}
    for s in d['shapes']:
        key='%dx%d'%(s['n'],s['k'])
        out[key]={'base':s['base_us'],'pts':{(p['k_chunk'],p['n_tb']):(p['step_us'],p['step_listed_us']) for p in s['points']}}
    return out
names=sys.argv[1:] or ['v8_1','v8_2','main_1','main_2']
R={n:load(f'bench_dec_{n}.json') for n in names}
for sh in R[names[0]]:
    print('##',sh,'base', ' / '.join('%.1f'%R[n][sh]['base'] for n in R))
    for (k,nt) in sorted(R[names[0]][sh]['pts']):
        print('  k %2d ntb %3d '%(k,nt), '  '.join('%s=%5.1f/%5.1f'%(n,*R[n][sh]['pts'][(k,nt)]) for n in R))
    ks=sorted(set(k for k,_ in R[names[0]][sh]['pts']))
    for k in ks:
        row=[]
        for n in R:
            pts={nt:v for (kk,nt),v in R[n][sh]['pts'].items() if kk==k}
            bs=min(pts.items(),key=lambda x:x[1][0]); bl=min(pts.items(),key=lambda x:x[1][1])
            row.append('%.1f(%d)/%.1f(%d)'%(bs[1][0],bs[0],bl[1][1],bl[0]))
        print('  best k',k, '  '.join(f'{n}={r}' for n,r in zip(R,row)))
