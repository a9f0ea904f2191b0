# loops.py X.sass: every backward branch spanning > 900 instructions, with the LDL/STL inside
import re,sys
ins=[]
for l in open(sys.argv[1]):
    m=re.match(r'\s+/\*([0-9a-f]{4,5})\*/\s+(.*?);',l)
    if m: ins.append((int(m.group(1),16),m.group(2).strip()))
for a,t in ins:
    m=re.search(r'BRA\s+(?:\S+, )?.*?0x([0-9a-f]+)',t)
    if m and 'BRA' in t.split()[0]+t.split()[1] if len(t.split())>1 else False:
        s=int(m.group(1),16)
        if s<a and (a-s)//16>900:
            body=[x for b,x in ins if s<=b<=a]
            print('  %5x-%5x %4d instrs: LDL %d STL %d'%(s,a,len(body),sum('LDL' in x for x in body),sum('STL' in x for x in body)))
