import re,sys,collections
txt=open(sys.argv[1]).read()
for f in re.split(r'\n\s*Function : ',txt)[1:]:
    name=f.split('\n')[0]
    if 'decode_mma' not in name: continue
    ins=[]
    for l in f.splitlines():
        m=re.match(r'\s+/\*([0-9a-f]{4,})\*/\s+(.*?);',l)
        if m: ins.append((int(m.group(1),16),m.group(2).strip()))
    print(name[:60], 'total', len(ins))
    for a,t in ins:
        m=re.search(r'BRA (?:\S+, )?`?\(?\.?L?_?x?_?(0x[0-9a-f]+)',t)
        if m and int(m.group(1),16)<a:
            s=int(m.group(1),16)
            c=collections.Counter()
            for b,x in ins:
                if s<=b<=a:
                    op=re.sub(r'^@!?U?P\w+ ','',x).split()[0].split('.')[0]; c[op]+=1
            n=sum(c.values())
            if n>100: print(hex(s),hex(a),n,dict(c.most_common(40)))
