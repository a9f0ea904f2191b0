# Per shape and k: best n_tb over 8/32/64/128/256, selecting and list given, two runs each of v8 and
# main; % of the run's base and % of a 4.44 ms step (main's no-DEC rows in this call: 4.43-4.45 ms).
import json
def load(f):
    d=json.load(open(f)); out={}
    for s in d['shapes']:
        out['%dx%d'%(s['n'],s['k'])]=(s['base_us'],{(p['k_chunk'],p['n_tb']):(p['step_us'],p['step_listed_us']) for p in s['points']})
    return out
R={n:load(f'bench_dec_{n}.json') for n in ['v8_1','v8_2','main_1','main_2']}
per={'4096x4096':64,'1024x4096':64,'14336x4096':64,'4096x14336':32}
name={'4096x4096':'q/o','1024x4096':'k/v','14336x4096':'gate/up','4096x14336':'down'}
STEP=4440.0
print('| shape | k | v8: sel / list (us, best n_tb) | main: sel / list | v8 list: % of base | % of step | main list: % of base | % of step |')
print('|---|---|---|---|---|---|---|---|')
for sh in per:
    for k in (1,4,16,64):
        cells=[];pct={}
        for tag in ('v8','main'):
            s=[];l=[];pb=[];ps=[]
            for i in (1,2):
                base,pts=R[f'{tag}_{i}'][sh]
                c={nt:v for (kk,nt),v in pts.items() if kk==k}
                bs=min(c.items(),key=lambda x:x[1][0]); bl=min(c.items(),key=lambda x:x[1][1])
                s.append('%.1f (%d)'%(bs[1][0],bs[0])); l.append('%.1f (%d)'%(bl[1][1],bl[0]))
                pb.append(100*(bl[1][1]-base)/base); ps.append(100*(bl[1][1]-base)*per[sh]/STEP)
            cells.append('%s, %s / %s, %s'%(s[0],s[1],l[0],l[1]))
            pct[tag]='%+.1f to %+.1f%% | %.1f-%.1f%%'%(min(pb),max(pb),min(ps),max(ps))
        print('| %s %s | %d | %s | %s | %s | %s |'%(name[sh],sh,k,cells[0],cells[1],pct['v8'],pct['main']))
