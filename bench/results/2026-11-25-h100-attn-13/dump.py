import re,sys
txt=open(sys.argv[1]).read(); lo=int(sys.argv[2],16); hi=int(sys.argv[3],16)
f=re.split(r'\n\s*Function : ',txt)[1]
out=[]
for l in f.splitlines():
    m=re.match(r'\s+/\*([0-9a-f]{4,})\*/\s+(.*?);',l)
    if m:
        a=int(m.group(1),16)
        if lo<=a<=hi: out.append('%05x %s'%(a,m.group(2).strip()))
open(sys.argv[4],'w').write('\n'.join(out)+'\n')
