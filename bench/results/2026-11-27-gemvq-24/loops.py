# loops.py CUBIN NAMESJSON: per kernel, registers (cuobjdump -res-usage), total SASS, and each loop (backward branch) size.
import subprocess, sys, json, re
cub, names = sys.argv[1], json.load(open(sys.argv[2]))
B='/tmp/aptsid/x125/usr/bin/'
res=subprocess.run([B+'cuobjdump','-res-usage',cub],capture_output=True,text=True).stdout
regs={}
cur=None
for l in res.splitlines():
    m=re.search(r'Function (\S+):',l)
    if m: cur=m.group(1)
    m=re.search(r'REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)',l)
    if m and cur: regs[cur]=m.groups()
dis=subprocess.run([B+'nvdisasm','-c','-hex' if False else '-c',cub],capture_output=True,text=True).stdout
funcs={}; cur=None
for l in dis.splitlines():
    m=re.match(r'\s*\.text\.(\S+):',l)
    if m: cur=m.group(1); funcs[cur]=[]; continue
    m=re.match(r'\s*/\*([0-9a-f]{4,})\*/\s+(.*?);',l)
    if m and cur: funcs[cur].append((int(m.group(1),16), m.group(2)))
    m2=re.match(r"^(\.L_x_\d+):",l.strip())
    if m2 and cur: funcs[cur].append((-1,m2.group(1)))
for e,low in names.items():
    ins=funcs.get(low,[])
    labels={}; pos=0; seq=[]
    for a,t in ins:
        if a<0: labels[t]=len(seq)
        else: seq.append((a,t))
    loops=[]
    for i,(a,t) in enumerate(seq):
        m=re.search(r'BRA\s+(?:`\()?(\.L_x_\d+)',t)
        if m and m.group(1) in labels and labels[m.group(1)]<=i:
            loops.append((labels[m.group(1)], i+1-labels[m.group(1)]))
    n=sum(1 for a,t in seq if not t.startswith('NOP'))
    print(f"{e}: regs/stack/shared/local {regs.get(low)} SASS {n} loops {sorted(loops)}")
