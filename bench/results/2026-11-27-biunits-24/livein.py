# livein.py X.plr: registers live at the kernel's first instruction, and the first instruction reading each
import re,sys
L=open(sys.argv[1]).read().split('\n')
hdr=next(l for l in L if '// |   # 0 1 2' in l)
h=hdr[hdr.index('#'):]
cols={}
for m in re.finditer(r'\d+',h): cols[m.start()]=int(m.group())
rows=[]
for l in L:
    m=re.match(r'\s+/\*([0-9a-f]{4,5})\*/\s+(.*?);',l)
    if m and '// |' in l:
        r=l[l.index('// |')+4:]
        i=r.index(next(c for c in r if c.isdigit())) 
        # align: the row's text after '// |' aligns with the header after '// |'
        rr=l[l.index('// |'):]; hh=hdr[hdr.index('// |'):]
        rows.append((int(m.group(1),16),m.group(2),rr))
hh=hdr[hdr.index('// |'):]
cpos={}
for m in re.finditer(r'\d+',hh):
    if m.start()>hh.index("#"): cpos[int(m.group())]=m.end()-1
r0=rows[0][2]
live=[reg for reg,p in cpos.items() if p<len(r0) and r0[p] in ':^vx']
print(len(live),'live at entry:',live)
for reg in live:
    for a,t,rr in rows:
        if re.search(r'\bR%d\b'%reg,t): print('R%d first at %x: %s'%(reg,a,t)); break
