# crit.py LOOP.txt: longest dependency chain (cycles) through one pass of a
# SASS loop body in program order, with rough sm_90 latencies; prints the
# total and the chain's share per opcode class.
import re,sys,collections
LAT={'IMMA':33,'HMMA':33,'MOVM':24,'LDS':30,'LDG':40,'SHFL':28,'MUFU':20,'S2R':25,'LDC':20,'S2UR':20,'I2F':6,'F2F':6}
def lat(op):
    b=op.split('.')[0]
    return LAT.get(b,5)
def regs(tok,w):
    m=re.match(r'-?\|?-?(R\d+)',tok)
    if not m: return []
    n=int(m.group(1)[1:]); return ['R%d'%(n+i) for i in range(w)]
def parse(line):
    a,t=line.split(' ',1)
    t=re.sub(r'^@!?P\w+ ','',t)
    op,_,rest=t.partition(' ')
    ops=[o.strip() for o in rest.split(', ')] if rest else []
    base=op.split('.')[0]
    srcs=[];dsts=[]
    if base in('BRA','BSSY','BSYNC','NOP','EXIT','DEPBAR','WARPSYNC','BAR','LDGDEPBAR','RET','CALL'): return op,[],[]
    store=base in('STS','STG','STL','LDGSTS','RED','ATOM','ATOMS')
    w=4 if '.128' in op else 2 if ('.64' in op or 'WIDE' in op) else 1
    mm=base in('IMMA','HMMA')
    for i,o in enumerate(ops):
        isdst=False
        if not store:
            if base.endswith('SETP'): isdst=i<2
            elif base=='SHFL': isdst=i<2
            elif i==0: isdst=True
            elif re.match(r'^P\d$|^PT$',o) and all(re.match(r'^P\d$|^PT$',x) or x.startswith('R') and j==0 for j,x in enumerate(ops[:i])) : isdst=True
        if isdst:
            if o.startswith('R'): dsts+=regs(o,4 if mm else w)
            elif re.match(r'^P\d$',o): dsts.append(o)
            continue
        for m in re.finditer(r'(R\d+)(\.64)?',o):
            ww=2 if m.group(2) else 1
            if mm: ww=2 if i==2 else 4
            srcs+=regs(m.group(1),ww)
        for m in re.finditer(r'\b(P\d)\b',o): srcs.append(m.group(1))
    pm=re.match(r'^@!?(P\d)',line.split(' ',1)[1])
    if pm: srcs.append(pm.group(1))
    return op,srcs,dsts
lines=[l.rstrip() for l in open(sys.argv[1]) if l.strip()]
lo=int(sys.argv[2],16) if len(sys.argv)>2 else 0; hi=int(sys.argv[3],16) if len(sys.argv)>3 else 1<<40
ready={};how={}
fin=0;finby=None
for l in lines:
    a=int(l.split()[0],16)
    if a<lo or a>hi: continue
    op,s,d=parse(l)
    t0=max([ready.get(r,0) for r in s]+[0]); pred=max(s,key=lambda r:ready.get(r,0)) if s else None
    t=t0+lat(op)
    node=(l,how.get(pred))
    for r in d: ready[r]=t; how[r]=node
    if t>fin: fin=t;finby=node
print('chain cycles',fin)
c=collections.Counter();n=finby;path=[]
while n: path.append(n[0]); c[n[0].split()[1].split('.')[0].lstrip('@!P0123456789 ')]+=lat(n[0].split()[1] if not n[0].split()[1].startswith('@') else n[0].split()[2]); n=n[1]
print(dict(c.most_common()))
if '-v' in sys.argv:
    for p in reversed(path): print(p)
