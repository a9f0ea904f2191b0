// Writes what the reference implementation's Unicode normalization knows,
// for gen_unorm.py to compare with Python's unicodedata: HF tokenizers
// normalizes with the unicode-normalization-alignments crate, whose tables
// are older than Python's (Unicode 14.0), so gen_unorm.py leaves out the
// data those tables lack (REFERENCE_LACKS in gen_unorm.py).
//
//   cd $(mktemp -d) && npm install tokenizers
//   NODE_PATH=$PWD/node_modules node /path/to/tokenizer/gen_unorm_ref.js > /tmp/hf_unorm.json
//   python3 gen_unorm.py --reference /tmp/hf_unorm.json   # prints REFERENCE_LACKS
//
// The JSON holds, for every code point but the surrogates and "\n" (the
// separator of the batches): "nfd" and "nfkd", the code points that NFD
// and NFKD change, with what they give; "ccc", the code points with a
// non-zero canonical combining class, found by reordering against two marks
// of classes 1 (U+0334) and 230 (U+0301); "marks", the code points the
// StripAccents normalizer removes (its crate's combining marks).
const t = require('tokenizers');
const cps = [];
for (let cp = 0; cp < 0x110000; cp++) if ((cp < 0xd800 || cp > 0xdfff) && cp !== 10) cps.push(cp);

// run normalizes f(cp) for every code point, in batches joined by "\n".
function run(normalizer, f) {
  const out = [];
  for (let i = 0; i < cps.length; i += 20000) {
    const part = cps.slice(i, i + 20000);
    const r = normalizer.normalizeString(part.map(f).join('\n')).split('\n');
    if (r.length !== part.length) throw new Error('a batch did not split back');
    out.push(...r);
  }
  return out;
}

const res = { nfd: {}, nfkd: {}, ccc: [], marks: [] };
for (const [name, n] of [['nfd', t.nfdNormalizer()], ['nfkd', t.nfkdNormalizer()]]) {
  const r = run(n, (c) => String.fromCodePoint(c));
  cps.forEach((c, i) => { if (r[i] !== String.fromCodePoint(c)) res[name][c] = [...r[i]].map((x) => x.codePointAt(0)); });
}
const nfd = t.nfdNormalizer();
const low = run(nfd, (c) => 'a' + String.fromCodePoint(c) + '\u0334');
const high = run(nfd, (c) => 'a\u0301' + String.fromCodePoint(c));
cps.forEach((c, i) => {
  const ch = String.fromCodePoint(c);
  // Reordered: a class above 1 (before U+0334) or below 230 (after U+0301).
  // A decomposable code point is judged by what NFD makes of it alone.
  const alone = nfd.normalizeString(ch);
  if (low[i] !== 'a' + alone + '\u0334' || high[i] !== 'a\u0301' + alone) res.ccc.push(c);
});
const stripped = run(t.stripAccentsNormalizer(), (c) => 'x' + String.fromCodePoint(c) + 'x');
cps.forEach((c, i) => { if (stripped[i] === 'xx') res.marks.push(c); });
process.stdout.write(JSON.stringify(res) + '\n');
