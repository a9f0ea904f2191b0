# an1.py TL.csv: per row of a BITDECODE_DECODE_TIMELINE_CSV file (session 26), the loop's max less its
# median per launch, the spread of a CTA's warps' loop ends, how the two CTAs of an SM, the entry and the
# prologue relate to a CTA's loop end, and the loop end less the launch's median by split and by item.
import csv, statistics as st, collections, sys
rows=[r for r in csv.reader(open(sys.argv[1]))]
def corr(x,y):
    mx,my=st.mean(x),st.mean(y); sx=sum((a-mx)**2 for a in x)**.5; sy=sum((b-my)**2 for b in y)**.5
    return sum((a-mx)*(b-my) for a,b in zip(x,y))/(sx*sy) if sx and sy else 0
for lab in sorted(set(r[0] for r in rows)):
    R=[r for r in rows if r[0]==lab]
    print('==',lab)
    bysplit=collections.defaultdict(list); byitem=collections.defaultdict(list)
    launches=collections.defaultdict(list)
    for r in R: launches[int(r[1])].append(r)
    pairc=[];wsp=[];lspread=[]; ent=[]; pro=[]
    for k,L in sorted(launches.items()):
        le=[int(r[9]) for r in L]; med=st.median(le)
        lspread.append((max(le)-med)/1e3)
        for r in L:
            bysplit[int(r[2])].append(int(r[9])-med); byitem[int(r[3])].append(int(r[9])-med)
            wsp.append((int(r[9])-int(r[8]))/1e3)
        sm=collections.defaultdict(list)
        for r in L: sm[int(r[5])].append(int(r[9]))
        a=[v[0] for v in sm.values() if len(v)==2]; b=[v[1] for v in sm.values() if len(v)==2]
        if a: pairc.append(corr(a,b))
        # does entry order / prologue predict loop end?
        ent.append(corr([int(r[6]) for r in L],le)); pro.append(corr([int(r[7]) for r in L],le))
    print(' loop max-median per launch us', [round(x,2) for x in lspread])
    print(' within-CTA warp spread (max-min loop end) median %.2f p90 %.2f'%(st.median(wsp), sorted(wsp)[int(.9*len(wsp))]))
    print(' corr of the two CTAs on one SM: %.2f'%st.mean(pairc) if pairc else '')
    print(' corr loop end vs entry %.2f, vs prologue end %.2f'%(st.mean(ent),st.mean(pro)))
    sm_split=[st.mean(v)/1e3 for k,v in sorted(bysplit.items())]
    print(' mean (loop end - median) by split us:', ' '.join('%.1f'%x for x in sm_split))
    print(' by item:', ' '.join('%.1f'%(st.mean(v)/1e3) for k,v in sorted(byitem.items())))
