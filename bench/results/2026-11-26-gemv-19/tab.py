# tab.py DIR [BASE]: the B = 1 rows of DIR's b_<variant>_<round>.json (bench model --json), one line a
# variant: each round's ms/step, then (mean - BASE's mean; floor / mean). Max-batch runs (mb*) skipped.
import json, glob, collections, sys
base = sys.argv[2] if len(sys.argv) > 2 else 'base'
res = collections.OrderedDict()
for f in sorted(glob.glob(sys.argv[1] + '/b_*.json')):
    v = f.split('/b_')[1][:-5].rsplit('_', 1)[0]
    if v.startswith('mb'):
        continue
    for r in json.load(open(f))['rows']:
        res.setdefault(v, collections.OrderedDict()).setdefault((r['kv'].split(':')[0], r['context']), []).append((r['ms_per_step'], r['floor_ms']))
keys = list(res[base].keys())
print('| variant | ' + ' | '.join(f'{k} {c // 1024}K' for k, c in keys) + ' |')
print('|---' * (len(keys) + 1) + '|')
for v, d in res.items():
    cells = []
    for k in keys:
        xs = [a for a, _ in d[k]]
        m = sum(xs) / len(xs)
        b = sum(a for a, _ in res[base][k]) / len(res[base][k])
        fl = sum(f for _, f in d[k]) / len(d[k])
        cells.append(f"{', '.join(f'{x:.2f}' for x in xs)} ({m - b:+.3f}; {fl / m * 100:.0f}%)")
    print(f'| {v} | ' + ' | '.join(cells) + ' |')
