const fs = require('fs'); const path = require('path');
const { Tokenizer } = require('tokenizers');
(async () => {
  const dir = process.argv[2];
  for (const name of process.argv.slice(3)) {
    const tok = Tokenizer.fromFile(path.join(dir, name, 'tokenizer.json'));
    const size = tok.getVocabSize(true);
    const texts = [];
    for (let i = 0; i < size; i++) {
      const s = await tok.decode([i], false);
      texts.push(s + ' ' + s, 'a' + s);
    }
    const ids = [];
    for (let i = 0; i < texts.length; i += 5000) {
      const encs = await tok.encodeBatch(texts.slice(i, i + 5000), { addSpecialTokens: false });
      for (const e of encs) ids.push(e.getIds());
    }
    fs.writeFileSync(path.join(dir, name, 'alltok.json'), JSON.stringify({ texts, ids }));
    console.log(name, texts.length);
  }
})();
