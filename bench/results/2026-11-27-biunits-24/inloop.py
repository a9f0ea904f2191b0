# inloop.py X.sass: the tile loop (first backward branch over 1000 instructions): its length and LDL/STL
import re,sys
ins=[]
for l in open(sys.argv[1]):
    m=re.match(r'\s+/\*([0-9a-f]{4,5})\*/\s+(.*?);',l)
    if m: ins.append((int(m.group(1),16),m.group(2).strip()))
for a,t in ins:
    m=re.match(r'(?:@!?P\w+\s+)?BRA\s+(?:\S+, )?0x([0-9a-f]+)',t)
    if m and int(m.group(1),16)<a and (a-int(m.group(1),16))//16>1000:
        s=int(m.group(1),16); break
loop=[t for b,t in ins if s<=b<=a]
print(len(loop),'instrs; LDL',sum('LDL' in t for t in loop),'STL',sum('STL' in t for t in loop))
