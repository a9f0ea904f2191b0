# Compare two cubins section by section (by name): prints sections that differ; .strtab (NVRTC's
# internal-namespace names carry a hash of the source text) is reported apart.
import sys, struct
def secs(p):
    b=open(p,'rb').read()
    shoff=struct.unpack_from('<Q',b,0x28)[0]; shentsize,shnum,shstrndx=struct.unpack_from('<HHH',b,0x3a)
    hdrs=[struct.unpack_from('<IIQQQQIIQQ',b,shoff+i*shentsize) for i in range(shnum)]
    so=hdrs[shstrndx][4]
    def name(o):
        e=b.index(b'\0',so+o); return b[so+o:e].decode()
    out={}
    for h in hdrs:
        n=name(h[0]); data=b[h[4]:h[4]+h[5]] if h[1]!=8 else b''
        out[n]=data
    return out
a,b=secs(sys.argv[1]),secs(sys.argv[2])
texts=[n for n in a if n.startswith('.text.')]
diff=[n for n in set(a)|set(b) if a.get(n)!=b.get(n)]
print(f"{len(texts)} .text sections; {len(a)} sections; differing: {sorted(diff)}")
print("TEXT SAME" if not any(n.startswith('.text') for n in diff) else "TEXT DIFF")
