# tab.py DIR...: the A/B table of run.sh's timed runs (ab_main1/2, ab_new1/2 bench attn JSON;
# mx_* bench model JSON), markdown. Speed = mean of main's times over mean of v2.15's; the
# fractions are each run's own read ceiling, averaged over the runs of a binary.
import json, os, statistics as st, sys
DIRS = sys.argv[1:] or ['r']
def load(n):
    for d in DIRS:
        p = f'{d}/{n}.json'
        if os.path.exists(p):
            return json.load(open(p))
    return None
ab = {n: load(n) for n in ['ab_main1', 'ab_new1', 'ab_main2', 'ab_new2']}
ab = {n: d for n, d in ab.items() if d}
print('read ceilings (GB/s):', ', '.join(f"{n} {d['read_ceiling_gb_per_s']:.0f}" for n, d in ab.items()))
print()
def rows(d):
    c = d['read_ceiling_gb_per_s']
    return {(r['format'].split(':')[0] + (':kt' if ':kt' in r['format'] else ''), r['B'], r['L']):
            (r['time_us'], r['bytes_read'], c, r.get('max_abs_err_vs_f64_ref', -1), r.get('splits'), r.get('kernel')) for r in d['rows']}
R = {n: rows(d) for n, d in ab.items()}
M = [n for n in R if 'main' in n]; N = [n for n in R if 'new' in n]
print('| format | B x L | splits | kernel | main us | v2.15 us | speed | of ceiling: main -> v2.15 | err main / v2.15 |')
print('|---|---|---|---|---|---|---|---|---|')
for k in R[M[0]]:
    f, b, l = k
    tm = [R[n][k][0] for n in M if k in R[n]]; tn = [R[n][k][0] for n in N if k in R[n]]
    if not tn: continue
    fr = lambda n: R[n][k][1] / R[n][k][0] / 1e3 / R[n][k][2] * 100
    fm = st.mean(fr(n) for n in M if k in R[n]); fv = st.mean(fr(n) for n in N if k in R[n])
    es = lambda x: '-' if x is None or x < 0 else f'{x:.1e}'
    print(f"| {f} | {b} x {l//1024}K | {R[M[0]][k][4]} | {R[M[0]][k][5]} | {' / '.join(f'{x:.1f}' for x in tm)} | {' / '.join(f'{x:.1f}' for x in tn)} | {st.mean(tm)/st.mean(tn):.3f}x | {fm:.1f}% -> **{fv:.1f}%** | {es(R[M[0]][k][3])} / {es(R[N[0]][k][3])} |")
print()
mx = {n: load(n) for n in ['mx_main1', 'mx_new1', 'mx_main2', 'mx_new2']}
mx = {n: d for n, d in mx.items() if d}
if mx:
    print('| run | KV | batch | ms/step | tokens/s | of floor |')
    print('|---|---|---|---|---|---|')
    for n, d in mx.items():
        for r in d.get('rows', []):
            print(f"| {n} | {r['kv'].split(':')[0]} | {r['batch']} | {r['ms_per_step']:.2f} | {r['tokens_per_s']:.1f} | {100*r['floor_fraction']:.1f}% |")
