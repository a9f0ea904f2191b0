import re,sys,collections,statistics
d=collections.defaultdict(list); cur=None; ceil=collections.defaultdict(list)
for line in open(sys.argv[1]):
    m=re.match(r'== round \d+: (\S+) BITDECODE_CPU_INT4=(\S+)',line)
    if m: cur=m.group(1)+' '+m.group(2); continue
    m=re.search(r'read ceiling ([\d.]+)',line)
    if m and cur: ceil[cur].append(float(m.group(1)))
    m=re.match(r'(\S+(?: proj)?)\s+(\d+x\d+)\s+wq-int4\s+T=(\d+)\s+([\d.]+) us \(min\s+([\d.]+)\)',line)
    if m and cur: d[(m.group(1),m.group(2),int(m.group(3)),cur)].append((float(m.group(4)),float(m.group(5))))
keys=sorted(set(k[3] for k in d),key=lambda s:['base float','base int8dot','new int8dot','new float'].index(s) if s in ['base float','base int8dot','new int8dot','new float'] else 9)
print('ceilings GB/s:',{k:v for k,v in ceil.items()})
shapes=[]
for k in d:
    if (k[0],k[1],k[2]) not in shapes: shapes.append((k[0],k[1],k[2]))
print('| layer | T | '+' | '.join(keys)+' |')
print('|---|---|'+'---|'*len(keys))
for s in shapes:
    row=[]
    for c in keys:
        v=d.get(s+(c,),[])
        if not v: row.append('-'); continue
        med=statistics.median([a for a,b in v]); mn=min(b for a,b in v)
        f = '%.1f (%.1f)'%(med,mn) if s[2]==1 else '%.2f (%.2f)'%(med/1000,mn/1000)
        row.append(f)
    print('| %s %s | %d | '%(s[0],s[1],s[2])+' | '.join(row)+' |')
