# summ.py LOG: medians (min of mins) over rounds of `bitdecode bench linear` rows, by binary/setting.
import re,sys,collections,statistics
d=collections.defaultdict(list); cur=None; ceil=collections.defaultdict(list); order=[]
for line in open(sys.argv[1]):
    m=re.match(r'== round \d+: (\S+) BITDECODE_CPU_INT4=(\S+)',line)
    if m:
        cur=m.group(1)+' '+m.group(2)
        if cur not in order: order.append(cur)
        continue
    m=re.search(r'read ceiling ([\d.]+)',line)
    if m and cur: ceil[cur].append(float(m.group(1)))
    m=re.match(r'(\S+(?: proj)?)\s+(\d+x\d+)\s+(wq-int\d)\s+T=(\d+)\s+([\d.]+) us \(min\s+([\d.]+)\)',line)
    if m and cur: d[(m.group(3),m.group(1),m.group(2),int(m.group(4)),cur)].append((float(m.group(5)),float(m.group(6))))
print('read ceilings GB/s:',dict(ceil))
shapes=[]
for k in d:
    if k[:4] not in shapes: shapes.append(k[:4])
print('| format | layer | T | '+' | '.join(order)+' |')
print('|---|---|---|'+'---|'*len(order))
for s in shapes:
    row=[]
    for c in order:
        v=d.get(s+(c,),[])
        if not v: row.append('-'); continue
        med=statistics.median([a for a,b in v]); mn=min(b for a,b in v)
        row.append('%.1f (%.1f)'%(med,mn) if s[3]==1 else '%.2f (%.2f)'%(med/1000,mn/1000))
    print('| %s | %s %s | %d | '%(s[0],s[1],s[2],s[3])+' | '.join(row)+' |')
