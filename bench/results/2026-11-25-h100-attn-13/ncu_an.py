import csv,sys,collections
rows=list(csv.reader(open(sys.argv[1])))
hdr=rows[1]; data=rows[2:]
ix={h:i for i,h in enumerate(hdr)}
st=[h for h in hdr if h.startswith('stall_') and 'Not Issued' not in h]
tot=collections.Counter()
for r in data:
    for h in st: tot[h]+=int(r[ix[h]] or 0)
S=sum(tot.values())
print('samples',S); print({k[6:]:round(100*v/S,1) for k,v in tot.most_common(12)})
# top instructions
top=sorted(data,key=lambda r:-int(r[ix['Warp Stall Sampling (All Samples)']] or 0))[:int(sys.argv[2]) if len(sys.argv)>2 else 30]
addr0=int(data[0][0],16)
for r in top:
    reasons=sorted(((int(r[ix[h]] or 0),h[6:]) for h in st),reverse=True)[:3]
    print('%05x %5s %-60s %s'%(int(r[0],16)-addr0, r[ix['Warp Stall Sampling (All Samples)']], r[1].strip()[:60], reasons))
