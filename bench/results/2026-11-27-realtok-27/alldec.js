const fs = require('fs'); const path = require('path');
const { Tokenizer } = require('tokenizers');
(async () => {
  const dir = process.argv[2];
  for (const name of process.argv.slice(3)) {
    const tok = Tokenizer.fromFile(path.join(dir, name, 'tokenizer.json'));
    const size = tok.getVocabSize(true);
    const seqs = [];
    for (let i = 0; i < size; i++) seqs.push([i], [i, (i * 7919 + 13) % size, 3 + (i % 300)]);
    const out = { seqs, plain: [], skip: [] };
    for (let i = 0; i < seqs.length; i += 20000) {
      out.plain.push(...await tok.decodeBatch(seqs.slice(i, i + 20000), false));
      out.skip.push(...await tok.decodeBatch(seqs.slice(i, i + 20000), true));
    }
    fs.writeFileSync(path.join(dir, name, 'alldec.json'), JSON.stringify(out));
    console.log(name, seqs.length);
  }
})();
