const fs = require('fs');
const { Tokenizer } = require('tokenizers');
(async () => {
  const text = fs.readFileSync(process.argv[2], 'utf8');
  for (const f of process.argv.slice(3)) {
    const tok = Tokenizer.fromFile(f);
    let best = 1e9, n = 0;
    for (let i = 0; i < 3; i++) {
      const t0 = process.hrtime.bigint();
      n = (await tok.encode(text, null, { addSpecialTokens: false })).getIds().length;
      const d = Number(process.hrtime.bigint() - t0) / 1e9; if (i == 0) console.log(f + ': first ' + d.toFixed(3)); best = Math.min(best, d);
    }
    console.log(f + ': ' + n + ' tokens, best of 3 ' + best.toFixed(3) + ' s');
  }
})();
