// Writes, for each Unicode general category that patterns may name, the code
// points the reference's Oniguruma puts in \p{Cat}, as [lo, hi] ranges, for
// gen_onigclass.go to compare with Go's tables (regexp2 matches with Go's
// Unicode 15.0; Oniguruma in HF tokenizers has 16.0).
//
//   cd $(mktemp -d) && npm install tokenizers
//   NODE_PATH=$PWD/node_modules node /path/to/tokenizer/gen_onigclass.js > /tmp/onig.json
//   go run gen_onigclass.go /tmp/onig.json > onigclass_tables.go
const { Tokenizer } = require('tokenizers');
const cats = ['L', 'Lu', 'Ll', 'Lt', 'Lm', 'Lo', 'M', 'Mn', 'Mc', 'Me', 'N', 'Nd', 'Nl', 'No',
  'P', 'Pc', 'Pd', 'Ps', 'Pe', 'Pi', 'Pf', 'Po', 'S', 'Sm', 'Sc', 'Sk', 'So'];
const cps = [];
for (let c = 0; c < 0x110000; c++) if ((c < 0xd800 || c > 0xdfff) && c !== 10) cps.push(c);
const out = {};
for (const cat of cats) {
  // A Split that keeps only the matches of \p{Cat}, one code point each.
  const tok = Tokenizer.fromString(JSON.stringify({
    version: '1.0', added_tokens: [], normalizer: null, post_processor: null, decoder: null,
    pre_tokenizer: { type: 'Split', pattern: { Regex: '\\p{' + cat + '}' }, behavior: 'Removed', invert: true },
    model: { type: 'BPE', vocab: {}, merges: [] },
  }));
  const pre = tok.getPreTokenizer();
  const set = [];
  for (let i = 0; i < cps.length; i += 20000) {
    const part = cps.slice(i, i + 20000);
    for (const [piece] of pre.preTokenizeString(part.map((c) => String.fromCodePoint(c)).join('\n'))) {
      for (const ch of piece) set.push(ch.codePointAt(0));
    }
  }
  set.sort((a, b) => a - b);
  const ranges = [];
  for (const c of set) {
    if (ranges.length && ranges[ranges.length - 1][1] === c - 1) ranges[ranges.length - 1][1] = c;
    else ranges.push([c, c]);
  }
  out[cat] = ranges;
}
process.stdout.write(JSON.stringify(out) + '\n');
