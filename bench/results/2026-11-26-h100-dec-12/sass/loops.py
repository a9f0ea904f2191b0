import re,sys,collections
txt=open(sys.argv[1]).read()
fn=sys.argv[2]
# isolate function
i=txt.find('Function : '+fn); j=txt.find('Function : ',i+10)
body=txt[i:j if j>0 else None]
ins=[]
for m in re.finditer(r'/\*([0-9a-f]{4,})\*/\s+([^;]*);',body):
    ins.append((int(m.group(1),16),m.group(2).strip()))
addr={a:k for k,(a,_) in enumerate(ins)}
loops=[]
for k,(a,s) in enumerate(ins):
    m=re.search(r'BRA (?:`\()?\.?[A-Z_]*\)?\s*0x([0-9a-f]+)|BRA 0x([0-9a-f]+)',s)
    if 'BRA' in s:
        t=re.findall(r'0x([0-9a-f]+)',s)
        if t:
            ta=int(t[-1],16)
            if ta<=a and ta in addr: loops.append((addr[ta],k))
for (s,e) in loops:
    seg=[x[1] for x in ins[s:e+1]]
    c=collections.Counter()
    for x in seg:
        op=re.sub(r'^@!?U?P\w+\s+','',x).split()[0]
        c[op.split('.')[0]]+=1
    if c['FMUL']>=4 and c['FADD']>=4:
        print('loop %x-%x n=%d'%(ins[s][0],ins[e][0],e-s+1), dict(c.most_common()))
        if len(sys.argv)>3:
            for x in ins[s:e+1]: print('   %x %s'%x)
