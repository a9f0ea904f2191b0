// Writes reference.json: the ids and texts that the reference implementation
// (Hugging Face tokenizers, through its Node binding, npm package
// "tokenizers") gives for the fixtures of this directory.
//
//   cd $(mktemp -d) && npm install tokenizers
//   NODE_PATH=$PWD/node_modules node /path/to/tokenizer/testdata/gen_reference.js
//
// For every fixture and text: ids with and without the post-processor's
// special tokens, the ids when special tokens in the text are plain text
// (HF's encode_special_tokens, obtained by renaming the special added tokens
// to strings that never occur, which is what that flag amounts to for
// encoding), and Decode
// with and without
// skip_special_tokens.
const fs = require('fs');
const path = require('path');
const { Tokenizer } = require('tokenizers');

const common = [
  "", " ", "  ", "Hello world", " Hello", "Hello  world", "a   b", "a \tb", "trailing   ",
  "\n\n\t", "x\n\n\ty", "line1\r\nline2\n", "DON'T you're I'M we'LL they'Ve", "'s 'S 'ſ 'x ''s",
  "1234567 12 3.14159 1,000", "٣٤٥ ½ Ⅻ", "emoji 🤗👍🏽 done", "CJK 你好世界 こんにちは",
  "mixed: naïve café über Straße", "combining e\u0301 a\u0308 n\u0303", "tabs\tand\vvertical\fform",
  "\u00a0nbsp\u2003em", "func main() {\n\tfmt.Println(\"hi\")\n}\n", "the quick brown fox",
  "hello hello hello", "   leading", "x  \n  y", "?!... --> ==", "don't stop", "I'll", "abc123def",
  "a\u2028b", "\u017ftrange",
];
const perFixture = {
  gpt2_prefix: ["<|endoftext|>", "Hello<|endoftext|>World", "a <|endoftext|> b", "<|endoftext|><|endoftext|>", "<|endoftext"],
  llama3_split: ["<|begin_of_text|>Hello", "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
    "zyzzyva zyzzyva", " zyzzyva", "<|reserved_special_token_1|>x", "<|eot_id", "99999 1234 12345678"],
  llama2_spm: ["<s>Hello", "Hello</s>", "Héllo straße", "über ïß", "<unk>", "a<s>b", " <s> x"],
  mistral_metaspace: ["[INST] Hello [/INST]", "[INST]Hello[/INST] Sure", "<s>[INST] a b [/INST]", "Héllo ïß x"],
  added_strip: ["hello <mask> world", "hello   <mask>   world", "<mask>", "a [SEP]   b", "a   <both>   b",
    "word", "a word here", "sword words", "word.", "<mask>x <mask>xy", "<mas <mask", "xaby ab", "<s>a</s>",
    "word\u200d", "\u200dword", "a\u200cword b", "\u00b2word", "word\u00bd", "\u00b9word\u00be", "\u24b6word",
    "word\u216b", "\u0301word", "word\u0903", "word\u20dd", "\u09f4word", "word\u1c89", "\u2028word\u3000"],
  qwen2_nfc: ["<|im_start|>user\nHello<|im_end|>\n", "e\u0301t\u00e9", "Å Å Å", "12345", "한국어 \u1100\u1161\u11a8"],
  zoo_split: ["a,b,,c d  e", "aeiou xyz 1234 a1b2", ",start end,", "  ", "x"],
  zoo_invert: ["hello world. foo; bar", "a1b22c333 d", "end.", "no-match"],
  zoo_metaspace: ["  Hello World  ", "a  b", "UPPER lower", "İstanbul"],
  zoo_whitespace: ["foo.bar, baz!! qux", "a1b22 x", "ﬁne ①②", "#a#", "aaa!?", "xx y_z"],
  spm_normspecial: ["<s>Hello</s>", "a <x y> b", "<x y><x y>", "x<ctl>y <ctl>", "<raw> <raw>", "\u2581<s>",
    "<s> <s>", "hello</s>world", "<x▁y>", "<x  y>"],
};

// Random text from a pool of characters that exercise every branch of the
// pre-tokenizers (deterministic: a linear congruential generator).
function randomTexts(seed, count, maxLen) {
  let x = seed >>> 0;
  const r = () => { x = (x * 1664525 + 1013904223) >>> 0; return x / 4294967296; };
  const pool = [..."aAsStTmMdDrReEvVlLxyz'''  \t\n\n\r\u00a0\u2003\u2028\u3000\v\f0123456789٣४½²Ⅻ.,;:!?-_()<>\"/\\|$+=~`éüßçå你好こん한국ÅÅ\u0301\u0308ſK🤗👍🏽\u200d\u0000\u0085▁Ġ"];
  const out = [];
  for (let i = 0; i < count; i++) {
    let s = '';
    const n = 1 + Math.floor(r() * maxLen);
    for (let j = 0; j < n; j++) s += pool[Math.floor(r() * pool.length)];
    out.push(s);
  }
  return out;
}

const dir = __dirname;
const out = { generator: "tokenizers (npm) " + require('tokenizers/package.json').version, fixtures: {} };
(async () => {
  for (const name of Object.keys(perFixture)) {
    const json = fs.readFileSync(path.join(dir, name + '.json'), 'utf8');
    const tok = Tokenizer.fromString(json);
    const j = JSON.parse(json);
    // Keep every added token's id: put each in the model vocabulary at its id,
    // so that HF's id assignment does not move them.
    j.added_tokens.forEach((t, i) => {
      if (t.special) {
        t.content = '\u0000unmatchable' + i + '\u0000';
      }
      j.model.vocab[t.content] = t.id;
    });
    const plain = Tokenizer.fromString(JSON.stringify(j));
    const cases = [];
    for (const text of common.concat(perFixture[name], randomTexts(name.length * 7919, 60, 60))) {
      const withSpecial = (await tok.encode(text, null, { addSpecialTokens: true })).getIds();
      const ids = (await tok.encode(text, null, { addSpecialTokens: false })).getIds();
      const asText = (await plain.encode(text, null, { addSpecialTokens: false })).getIds();
      cases.push({
        text, ids, ids_special: withSpecial, ids_special_as_text: asText,
        decoded: await tok.decode(withSpecial, false),
        decoded_skip: await tok.decode(withSpecial, true),
      });
    }
    out.fixtures[name] = cases;
  }
  // One case per line: compact, and diffs stay readable.
  const lines = ['{"generator": ' + JSON.stringify(out.generator) + ', "fixtures": {'];
  Object.entries(out.fixtures).forEach(([name, cases], i, all) => {
    lines.push(JSON.stringify(name) + ': [');
    cases.forEach((c, j) => lines.push(JSON.stringify(c) + (j + 1 < cases.length ? ',' : '')));
    lines.push(']' + (i + 1 < all.length ? ',' : ''));
  });
  lines.push('}}');
  fs.writeFileSync(path.join(dir, 'reference.json'), lines.join('\n') + '\n');

  // The real checkpoint of this repository: chunks of heldout.txt (cut at
  // character boundaries) and random text, ids with BOS.
  const model = path.join(dir, '..', '..', '..', 'shared', 'models', 'gocoder-23m');
  if (fs.existsSync(path.join(model, 'tokenizer.json'))) {
    const tok = Tokenizer.fromFile(path.join(model, 'tokenizer.json'));
    const held = [...fs.readFileSync(path.join(model, 'heldout.txt'), 'utf8')];
    const texts = [];
    for (let i = 0; texts.length < 80; i += 35731) texts.push(held.slice(i, i + 200 + (i % 500)).join(''));
    const cases = [];
    for (const text of texts.concat(randomTexts(4242, 60, 60))) {
      const ids = (await tok.encode(text, null, { addSpecialTokens: true })).getIds();
      cases.push({ text, ids, decoded: await tok.decode(ids, false) });
    }
    fs.writeFileSync(path.join(dir, 'reference_gocoder.json'), '{"generator": ' + JSON.stringify(out.generator) +
      ', "cases": [\n' + cases.map(c => JSON.stringify(c)).join(',\n') + '\n]}\n');
  }
})();
