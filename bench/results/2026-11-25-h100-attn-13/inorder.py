# in-order single-warp issue model over a SASS loop body: each instruction
# issues at max(previous issue + 1, its sources ready); prints total cycles
# and the stall cycles attributed to each producer opcode class
import sys,collections,importlib.util
spec=importlib.util.spec_from_file_location('c','/tmp/i2b/crit.py')
src=open('/tmp/i2b/crit.py').read().split("lines=[l.rstrip()")[0]
exec(src)
lines=[l.rstrip() for l in open(sys.argv[1]) if l.strip()]
ready={};prod={};t=0;stall=collections.Counter()
for l in lines:
    op,s,d=parse(l)
    r=max([ready.get(x,0) for x in s]+[0])
    if r>t+1:
        x=max(s,key=lambda x:ready.get(x,0)); stall[prod[x]]+=r-t-1
    t=max(t+1,r)
    for x in d: ready[x]=t+lat(op); prod[x]=op.split('.')[0]
print('in-order cycles',t,'instructions',len(lines),'stalls',dict(stall.most_common(8)))
