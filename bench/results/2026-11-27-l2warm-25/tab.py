# Table of bench model B = 1 runs: ms/step per point, mean - base's mean. usage: tab.py DIR modes...
import sys, re, glob, os
d = sys.argv[1]; modes = sys.argv[2:]
pts = []
def read(f):
    out = {}
    for line in open(f):
        m = re.match(r'\S+\s+(\S+)\s+ctx\s+(\d+) B 1 TP 1: ([\d.]+) ms/step .*\((\d+)%\)', line)
        if m:
            k = (m.group(1), int(m.group(2)))
            out[k] = (float(m.group(3)), m.group(4))
            if k not in pts: pts.append(k)
    return out
runs = {m: [read(f) for f in sorted(glob.glob(os.path.join(d, 'm_%s_[0-9].log' % m)))] for m in modes}
base = modes[0]
def lab(k): return '%s %s' % (k[0], {1024: '1K', 32768: '32K', 131072: '128K'}.get(k[1], k[1]))
print('| mode | ' + ' | '.join(lab(k) for k in pts) + ' |')
print('|---' * (len(pts) + 1) + '|')
for m in modes:
    cells = []
    for k in pts:
        v = [r[k][0] for r in runs[m] if k in r]
        if m == base:
            cells.append(', '.join('%.2f' % x for x in v) + ' (%s%%)' % runs[m][0][k][1])
        else:
            b = [r[k][0] for r in runs[base] if k in r]
            cells.append('%+.3f' % (sum(v) / len(v) - sum(b) / len(b)))
    print('| %s | ' % m + ' | '.join(cells) + ' |')
