# tab.py: the A/B table of call1's three runs (main1, new1, main2; new2 was skipped by
# run.sh's time guard), markdown. Speed = mean of main's two times over v2.13's one.
import json, statistics as st
runs = {n: json.load(open(f'call1/{n}.json')) for n in ['main1', 'new1', 'main2']}
def rows(n):
    d = runs[n]; c = d['read_ceiling_gb_per_s']
    return {(r['format'], r['B'], r['L']): (r['time_us'], r['bytes_read'], c, r.get('max_abs_err_vs_f64_ref', -1)) for r in d['rows']}
R = {n: rows(n) for n in runs}
print('ceilings (GB/s):', ', '.join(f"{n} {runs[n]['read_ceiling_gb_per_s']:.0f}" for n in runs))
print()
print('| format | B x L | KV MiB | main us (1 / 2) | v2.13 us | speed | of ceiling: main -> v2.13 | err main / v2.13 |')
print('|---|---|---|---|---|---|---|---|')
for k in R['main1']:
    f, b, l = k
    m = [R['main1'][k][0], R['main2'][k][0]]; v = R['new1'][k][0]
    by = R['main1'][k][1]
    fr = lambda n: by / R[n][k][0] / 1e3 / R[n][k][2] * 100
    fm = (fr('main1') + fr('main2')) / 2; fv = fr('new1')
    sp = st.mean(m) / v
    e = lambda n: R[n][k][3]
    es = lambda x: '-' if x is None or x < 0 else f'{x:.1e}'
    print(f'| {f.split(":")[0]} | {b} x {l//1024}K | {by/2**20:.0f} | {m[0]:.1f} / {m[1]:.1f} | {v:.1f} | {sp:.3f}x | {fm:.1f}% -> **{fv:.1f}%** | {es(e("main1"))} / {es(e("new1"))} |')
