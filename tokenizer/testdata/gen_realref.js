// Writes the reference outputs that TestRealTokenizers (realtok_test.go)
// compares the package with, for real tokenizer.json files that this
// repository does not ship (their vocabularies are too large to commit).
//
//   cd $(mktemp -d) && npm install tokenizers
//   NODE_PATH=$PWD/node_modules node /path/to/tokenizer/testdata/gen_realref.js DIR
//   BITDECODE_REALTOK_DIR=DIR go test ./tokenizer -run RealTokenizers
//
// DIR holds one folder per tokenizer, each with its tokenizer.json (laid out
// by realtok_dir.py from npm packages that ship real files); the script
// writes reference.json beside each. The texts are made here, from a
// seeded generator, so every run writes the same ones: random code points of
// every script and category, whitespace runs of every kind and length, digit
// runs, code, CJK, emoji sequences, combining marks and text whose NFC, NFD
// and NFKC forms differ, noncharacters and lone surrogates, the file's own
// added tokens embedded at odd places, cut short and run together, and
// very long words. For each text: the ids with and without the
// post-processor's tokens and with special tokens read as text (HF's
// encode_special_tokens, obtained as gen_reference.js does), the decoded
// text with and without skip_special_tokens, and what HF's DecodeStream
// returns at each step.
// Random id sequences (what a model may generate: byte tokens, specials,
// anything, and a few ids past the vocabulary) are decoded and streamed the
// same way. With REALREF_ALLCP=1 it also writes allcp.jsonl: every code point
// in context, encoded (see allCodePoints).
//
// The Node binding has no DecodeStream, so streamStep below is the Rust
// step_decode_stream (tokenizers/src/tokenizer/mod.rs) line by line, over
// the binding's decode; lengths and slices are in UTF-8 bytes as in Rust.
const fs = require('fs');
const path = require('path');
const { Tokenizer } = require('tokenizers');

// A linear congruential generator: the same texts on every run.
function rng(seed) {
  let x = seed >>> 0;
  const next = () => { x = (Math.imul(x, 1664525) + 1013904223) >>> 0; return x / 4294967296; };
  return {
    f: next,
    int: (n) => Math.floor(next() * n),
    pick: (a) => a[Math.floor(next() * a.length)],
  };
}

// Code point ranges of many scripts and categories; random text draws a
// range, then a code point in it.
const ranges = [
  [0x20, 0x7e], [0x00, 0x1f], [0x7f, 0x9f], [0xa0, 0xff], [0x100, 0x24f], [0x250, 0x2af], [0x2b0, 0x2ff],
  [0x300, 0x36f], [0x370, 0x3ff], [0x400, 0x4ff], [0x530, 0x58f], [0x590, 0x5ff], [0x600, 0x6ff],
  [0x700, 0x74f], [0x780, 0x7bf], [0x900, 0x97f], [0x980, 0x9ff], [0xa00, 0xa7f], [0xb80, 0xbff],
  [0xc00, 0xc7f], [0xd00, 0xd7f], [0xe00, 0xe7f], [0xe80, 0xeff], [0xf00, 0xfff], [0x1000, 0x109f],
  [0x10a0, 0x10ff], [0x1100, 0x11ff], [0x1200, 0x137f], [0x13a0, 0x13ff], [0x1680, 0x169f],
  [0x1780, 0x17ff], [0x1800, 0x18af], [0x1e00, 0x1eff], [0x1f00, 0x1fff], [0x2000, 0x206f],
  [0x2070, 0x209f], [0x20a0, 0x20cf], [0x20d0, 0x20ff], [0x2100, 0x214f], [0x2150, 0x218f],
  [0x2190, 0x21ff], [0x2200, 0x22ff], [0x2460, 0x24ff], [0x2500, 0x257f], [0x2600, 0x26ff],
  [0x2700, 0x27bf], [0x2c00, 0x2c5f], [0x2e80, 0x2eff], [0x3000, 0x303f], [0x3040, 0x309f],
  [0x30a0, 0x30ff], [0x3130, 0x318f], [0x3200, 0x32ff], [0x3300, 0x33ff], [0x3400, 0x4dbf],
  [0x4e00, 0x9fff], [0xa000, 0xa48f], [0xa640, 0xa69f], [0xa960, 0xa97f], [0xac00, 0xd7a3],
  [0xd7b0, 0xd7ff], [0xe000, 0xf8ff], [0xf900, 0xfaff], [0xfb00, 0xfb4f], [0xfb50, 0xfdff],
  [0xfe00, 0xfe0f], [0xfe20, 0xfe2f], [0xfe30, 0xfe4f], [0xfe70, 0xfeff], [0xff00, 0xffef],
  [0xfff0, 0xffff], [0x10000, 0x1007f], [0x10300, 0x1032f], [0x10400, 0x1044f], [0x1d400, 0x1d7ff],
  [0x1f000, 0x1f02f], [0x1f100, 0x1f1ff], [0x1f300, 0x1f5ff], [0x1f600, 0x1f64f], [0x1f680, 0x1f6ff],
  [0x1f900, 0x1f9ff], [0x1fa70, 0x1faff], [0x20000, 0x2a6df], [0x2f800, 0x2fa1f], [0x30000, 0x3134f],
  [0xe0000, 0xe007f], [0xe0100, 0xe01ef], [0xf0000, 0xffffd], [0x10fff0, 0x10ffff],
];

// Every whitespace or space-like character, and some that are not (ZWSP,
// the Mongolian vowel separator, U+FEFF).
const spaces = [' ', '\t', '\n', '\r', '\v', '\f', '\u0085', '\u00a0', '\u1680', '\u2000', '\u2001', '\u2002',
  '\u2003', '\u2004', '\u2005', '\u2006', '\u2007', '\u2008', '\u2009', '\u200a', '\u2028', '\u2029', '\u202f',
  '\u205f', '\u3000', '\u180e', '\u200b', '\ufeff', '\r\n', '\u001c', '\u001d', '\u001e', '\u001f'];

const words = ['the', 'The', 'THE', 'hello', 'World', "don't", "I'M", "we'LL", "they'Ve", 'naïve', 'café', 'Straße',
  'ΑΒΓ', 'αβγ', 'Привет', 'мир', 'שלום', 'مرحبا', 'नमस्ते', 'বাংলা', 'สวัสดี', 'ქართული', 'Հայերեն', 'ᐊᐃᐅ',
  '你好', '世界', '日本語', 'こんにちは', 'カタカナ', '한국어', '안녕하세요', 'x', 'a', 'İstanbul', 'ſ', 'ǅ', 'ﬁne', 'Ⅻ',
  '½', '²', '①', 'K', 'Å', 'µ', 'ŉ', 'ΐ', 'ß', 'ẞ', 'ǰ', 'fooBar', 'snake_case', 'kebab-case', 'CamelCase',
  'HTTPServer', 'x86_64', 'v1.2.3', 'e.g.', 'U.S.A.', '...', '--', '->', '=>', '::', '!=', '===', '&&', '||', '#',
  '@user', 'https://example.com/a?b=c&d=e#f', 'user@example.com', '$100', '€5', '£', '¥', '©', '®', '™', '°C'];

const codes = [
  'package main\n\nimport "fmt"\n\nfunc main() {\n\tfor i := 0; i < 10; i++ {\n\t\tfmt.Println(i)\n\t}\n}\n',
  'def f(x: int) -> int:\n    """Doc."""\n    if x <= 1:\n        return 1\n    return x * f(x - 1)\n\n\nprint(f(10))\n',
  'const xs = [1, 2, 3].map((x) => x ** 2);\nconsole.log(`sum: ${xs.reduce((a, b) => a + b, 0)}`);\n',
  '#include <stdio.h>\nint main(void) {\n  char *s = "hi\\n";\n  printf("%s", s);\n  return 0;\n}\n',
  'fn main() {\n    let v: Vec<u32> = (0..10).filter(|x| x % 2 == 0).collect();\n    println!("{:?}", v);\n}\n',
  '<!DOCTYPE html>\n<html>\n  <body>\n    <p class="x">Hello &amp; welcome</p>\n  </body>\n</html>\n',
  '{"key": [1, 2.5, -3e10, true, null], "nested": {"a": "b\\u00e9"}}',
  '#!/bin/bash\nset -euo pipefail\nfor f in *.txt; do\n  echo "$f" | sed \'s/a/b/g\' >> out.log\ndone\n',
  'SELECT id, name FROM users WHERE age >= 18 AND name LIKE \'%son\' ORDER BY id DESC;\n',
  '\\begin{equation}\n  E = mc^2 \\quad \\int_0^\\infty e^{-x^2} dx = \\frac{\\sqrt{\\pi}}{2}\n\\end{equation}\n',
  'public class Main {\n\tpublic static void main(String[] args) {\n\t\tSystem.out.println("Hi");\n\t}\n}\n',
  '    \n\t\t  \n        return;\n\n\n\n}\n',
];

const prose = [
  'The quick brown fox jumps over the lazy dog. 1234567890!',
  '我们的目标是在2025年之前完成这个项目，预算为300万元。',
  '東京は日本の首都です。人口は約1400万人で、世界最大級の都市圏を形成している。',
  '대한민국의 수도는 서울특별시이며, 인구는 약 970만 명이다.',
  'Съешь же ещё этих мягких французских булок, да выпей чаю.',
  'Ο γρήγορος καφέ αλεπού πηδά πάνω από το τεμπέλικο σκυλί.',
  'الثعلب البني السريع يقفز فوق الكلب الكسول. ١٢٣٤٥',
  'द्रुत भूरी लोमड़ी आलसी कुत्ते के ऊपर कूदती है। १२३४५',
  'เป็นมนุษย์สุดประเสริฐเลิศคุณค่า กว่าบรรดาฝูงสัตว์เดรัจฉาน',
  'Zwölf Boxkämpfer jagen Viktor quer über den großen Sylter Deich.',
  'Pchnąć w tę łódź jeża lub ośm skrzyń fig.',
  'Tiếng Việt có dấu: Xin chào, tôi tên là Nguyễn Văn Ánh.',
];

// Emoji sequences: ZWJ families, skin tones, flags, keycaps, variation
// selectors, tags.
const emoji = ['👍', '👍🏽', '👩‍💻', '👨‍👩‍👧‍👦', '🏳️‍🌈', '🇫🇷', '🇯🇵', '1️⃣', '#️⃣', '❤️', '❤', '☺︎', '🤗', '🧑🏿‍🤝‍🧑🏻',
  '🏴󠁧󠁢󠁳󠁣󠁴󠁿', '😀😃😄', '🫠', '👁️‍🗨️', '🙇‍♀️', '©️', '™️'];

// Strings whose NFC, NFD, NFKC and NFKD forms differ, and combining marks.
const norms = ['e\u0301', '\u00e9', 'A\u030a', '\u212b', '\u00c5', 'Å', 'K', '\u1e9b\u0323', 'ﬃ', '①②③', '㍿', 'ｶﾞ',
  'ｱｲｳ', 'Ｆｕｌｌ', '\u0041\u0301\u0302\u0303\u0304\u0305', 'a\u0360\u0361b', '\u1100\u1161\u11a8', '\uac01',
  'ᄀᄀᄀ각ᆨᆨ', 'Z\u0351\u0352\u0353\u0354\u0355\u0356\u0357\u0358\u0359\u035a', '\u0958', '\u0915\u093c', 'ǅ',
  '\u2126', '\u03a9', '\u00b5', 'x\u0338', '\u2260', '\u0300a', '\u0301', '\u0f73', '\u0344', '\u0340\u0341',
  '\u1fee', '\u0385', 'ﷺ', 'ﷻ', '\u3099\u309a', 'か\u3099', 'が', '\ufb2c', '\u05e9\u05c1\u05bc'];

// Noncharacters, controls, lone surrogates and other code points that JSON
// can carry.
const odd = ['\u0000', '\u0001', '\u001b[31m', '\ufffd', '\ufffe', '\uffff', '\ud800', '\udfff', '\ud83d', '\udc4d x',
  '\u{10ffff}', '\u{e0001}', '\u{f0000}', '\u200d', '\u200c', '\u200e\u200f', '\u202e', '\u2066', '\u00ad', '\u034f',
  '\u061c', '\u115f', '\u3164', '\uffa0', '\u{1d173}', '\u{e0020}'];

function randomUnicode(r, n) {
  let s = '';
  for (let i = 0; i < n; i++) {
    const [a, b] = r.pick(ranges);
    let cp = a + r.int(b - a + 1);
    if (cp >= 0xd800 && cp <= 0xdfff) cp = 0x41;
    s += String.fromCodePoint(cp);
  }
  return s;
}

function spaceRun(r, n) {
  let s = '';
  const same = r.f() < 0.5 ? r.pick(spaces) : null;
  for (let i = 0; i < n; i++) s += same || r.pick(spaces);
  return s;
}

function digitRun(r, n) {
  const sets = ['0123456789', '٠١٢٣٤٥٦٧٨٩', '०१२३४५६७८९', '０１２３４５６７８９', '𝟎𝟏𝟐𝟑𝟒', '²³¹⁴', '½¼¾', 'ⅠⅡⅢⅣ'];
  const set = [...(r.f() < 0.7 ? sets[0] : r.pick(sets))];
  let s = '';
  for (let i = 0; i < n; i++) s += r.pick(set);
  return s;
}

// Pieces joined by a random separator (or none), the texts of most cases.
function mixed(r, added) {
  const parts = [];
  const k = 1 + r.int(12);
  for (let i = 0; i < k; i++) {
    switch (r.int(10)) {
      case 0: parts.push(randomUnicode(r, 1 + r.int(8))); break;
      case 1: parts.push(spaceRun(r, 1 + r.int(12))); break;
      case 2: parts.push(digitRun(r, 1 + r.int(14))); break;
      case 3: parts.push(r.pick(emoji)); break;
      case 4: parts.push(r.pick(norms)); break;
      case 5: parts.push(r.pick(odd)); break;
      case 6: parts.push(added.length ? r.pick(added) : r.pick(words)); break;
      case 7: parts.push(r.pick(prose).slice(0, 1 + r.int(40))); break;
      default: parts.push(r.pick(words));
    }
  }
  const seps = ['', ' ', ' ', '  ', '\n', '\t', '', ' \n'];
  return parts.map((p) => p + r.pick(seps)).join('');
}

// Added tokens embedded at odd places: inside words, doubled, beside
// spaces and newlines, cut short, in another case.
function withAdded(r, added) {
  if (!added.length) return mixed(r, added);
  const t = r.pick(added);
  const w = r.pick(words);
  const forms = [
    t, t + t, w + t + w, ' ' + t + ' ', '  ' + t + '  ' + w, '\n' + t + '\n', w + ' ' + t, t + w,
    t.slice(0, Math.max(1, t.length - 1)), t.slice(1), t.toUpperCase(), t.toLowerCase(), t + ' ' + r.pick(added),
    r.pick(added) + t + r.pick(added), w + '\t' + t + '\t\t' + w, t.slice(0, 2) + t, '\u00a0' + t + '\u3000',
  ];
  return r.pick(forms);
}

// Added tokens cut short at either end, whole or not, run together with
// or without something between them: where the added vocabulary's
// leftmost-longest split (overlapping contents, a token that is another's
// prefix) is tested.
function addedRun(r, added) {
  const seps = ['', '', '', ' ', '  ', '\n', 'x', '\u2581', '\u3000', '\t', 'ab'];
  const cut = (t) => {
    const cps = [...t];
    const a = r.f() < 0.5 ? 0 : r.int(cps.length);
    const b = r.f() < 0.5 ? cps.length : a + r.int(cps.length - a + 1);
    return cps.slice(a, b).join('');
  };
  let s = '';
  for (let k = 2 + r.int(6); k > 0; k--) s += (r.f() < 0.5 ? r.pick(added) : cut(r.pick(added))) + r.pick(seps);
  return s;
}

// The forms of one added token beside pieces of itself.
function addedForms(r, t) {
  const cps = [...t];
  const k = 1 + r.int(Math.max(1, cps.length - 1));
  const head = cps.slice(0, k).join(''), tail = cps.slice(k).join('');
  return [t + head, cps.slice(-k).join('') + t, head + t + tail, t.toUpperCase() + t.toLowerCase(), ' ' + t + t + ' ',
    '\u2581' + t + '\u2581', 'a' + t + 'ab' + t];
}

function longWord(r) {
  switch (r.int(8)) {
    case 0: return 'a'.repeat(500 + r.int(3000));
    case 1: { let s = ''; const n = 1000 + r.int(2000); for (let i = 0; i < n; i++) s += String.fromCharCode(97 + r.int(26)); return s; }
    case 2: return digitRun(r, 300 + r.int(1000));
    case 3: return ' '.repeat(100 + r.int(1000)) + 'x';
    case 4: return '\n'.repeat(50 + r.int(300)) + 'y' + '\t'.repeat(50 + r.int(100));
    case 5: return '你'.repeat(200 + r.int(800));
    case 6: return r.pick(words).repeat(100 + r.int(300));
    default: return '!'.repeat(50 + r.int(300)) + '=='.repeat(50 + r.int(200));
  }
}

// makeTexts returns the texts of one tokenizer; REALREF_SCALE (default 1)
// multiplies the number of random ones, REALREF_SEED (default 0) draws
// others. decoded holds texts decoded from
// random ids of its vocabulary, which are encoded again.
function makeTexts(seed, added, decoded) {
  const r = rng(seed);
  const scale = Number(process.env.REALREF_SCALE || 1);
  const texts = [
    '', ' ', '  ', '\n', '\t', 'Hello world', ' Hello', 'Hello  world', 'trailing   ', '   leading',
    "DON'T you're I'M we'LL they'Ve 's 'S 'ſ", '1234567 12 3.14159 1,000', 'x\n\n\ty', 'line1\r\nline2\n',
  ];
  for (const c of codes) texts.push(c);
  for (const p of prose) texts.push(p);
  for (const e of emoji) texts.push('a' + e + ' ' + e + e);
  for (const n of norms) texts.push(n + ' ' + n + 'x');
  for (const o of odd) texts.push('a' + o + 'b ' + o);
  for (const t of added.slice(0, 40)) texts.push(t, 'x' + t + 'y', ' ' + t + ' ');
  const n = (k) => Math.round(k * scale);
  for (let i = 0; i < n(60); i++) texts.push(randomUnicode(r, 1 + r.int(40)));
  for (let i = 0; i < n(40); i++) texts.push(r.pick(words) + spaceRun(r, 1 + r.int(40)) + r.pick(words) + spaceRun(r, r.int(6)));
  for (let i = 0; i < n(30); i++) texts.push(digitRun(r, 1 + r.int(30)) + r.pick(['', ' ', '.', ',', 'a', '\n']) + digitRun(r, 1 + r.int(8)));
  for (let i = 0; i < n(120); i++) texts.push(mixed(r, added));
  for (let i = 0; i < n(60); i++) texts.push(withAdded(r, added));
  for (let i = 0; i < n(12); i++) texts.push(longWord(r));
  for (let i = 0; i < n(3); i++) { let s = ''; while (s.length < 20000) s += mixed(r, added) + r.pick(codes) + r.pick(prose); texts.push(s); }
  if (added.length) {
    for (let i = 0; i < n(100); i++) texts.push(addedRun(r, added));
    for (const t of added.slice(0, 40)) texts.push(...addedForms(r, t));
  }
  return texts.concat(decoded);
}

// HF's DecodeStream::step (tokenizers/src/tokenizer/mod.rs,
// step_decode_stream), with byte lengths and byte slices as in Rust.
async function streamStep(tok, st, id, skip) {
  const bytes = (s) => Buffer.byteLength(s, 'utf8');
  if (st.prefix === '' && st.ids.length > 0) {
    const p = await tok.decode(st.ids, skip);
    if (!p.endsWith('\ufffd')) { st.prefix = p; st.prefixIndex = st.ids.length; }
  }
  st.ids.push(id);
  const s = await tok.decode(st.ids, skip);
  if (bytes(s) > bytes(st.prefix) && !s.endsWith('\ufffd')) {
    if (!s.startsWith(st.prefix)) throw new Error('InvalidPrefix');
    const text = Buffer.from(s, 'utf8').subarray(bytes(st.prefix)).toString('utf8');
    const n = st.ids.length - st.prefixIndex;
    st.ids = st.ids.slice(st.prefixIndex);
    st.prefix = await tok.decode(st.ids, skip);
    st.prefixIndex = n;
    return text;
  }
  return '';
}

// The chunks that DecodeStream gives for ids, or null when it fails (its
// InvalidPrefix error, which the package handles differently on purpose).
async function stream(tok, ids, skip) {
  const st = { ids: [], prefix: '', prefixIndex: 0 };
  const out = [];
  try {
    for (const id of ids) out.push(await streamStep(tok, st, id, skip));
  } catch (e) {
    return null;
  }
  return out;
}

async function run(dir, name) {
  const file = path.join(dir, name, 'tokenizer.json');
  const json = fs.readFileSync(file, 'utf8');
  const tok = Tokenizer.fromString(json);
  const j = JSON.parse(json);
  const added = j.added_tokens.map((t) => t.content);
  // The ids HF gives the added tokens: their "id" fields are not read (an
  // added token already in the vocabulary takes the vocabulary's id, a new
  // one the next free id).
  const addedIDs = added.map((c) => tok.tokenToId(c));
  // encode_special_tokens, as gen_reference.js obtains it: the special
  // added tokens renamed to strings that never occur, every added token kept
  // at its id through the model's vocabulary.
  j.added_tokens.forEach((t, i) => {
    if (t.special) t.content = '\u0000unmatchable' + i + '\u0000';
    if (j.model.vocab && !(t.content in j.model.vocab)) j.model.vocab[t.content] = addedIDs[i];
  });
  const plain = Tokenizer.fromString(JSON.stringify(j));

  // Random id sequences (what a model may generate: byte tokens, specials,
  // anything): the added tokens and the low ids (byte tokens of
  // SentencePiece vocabularies) drawn more often, 1% past the vocabulary.
  const seed = Number(process.env.REALREF_SEED || 0);
  const r = rng(0xdec0de + name.length + seed);
  const size = tok.getVocabSize(true);
  const randomIDs = (count) => {
    const ids = [];
    for (let k = 0; k < count; k++) {
      const u = r.f();
      ids.push(u < 0.15 && addedIDs.length ? r.pick(addedIDs) : u < 0.4 ? r.int(Math.min(size, 600)) : u < 0.41 ? size + r.int(1000) : r.int(size));
    }
    return ids;
  };
  const decoded = [];
  const scale = Number(process.env.REALREF_SCALE || 1);
  for (let i = 0; i < Math.round(60 * scale); i++) decoded.push(await tok.decode(randomIDs(1 + r.int(60)), i % 2 == 0));

  const cases = [];
  for (const text of makeTexts(0x5eed + name.length * 7919 + seed, added, decoded)) {
    const idsSpecial = (await tok.encode(text, null, { addSpecialTokens: true })).getIds();
    cases.push({
      text,
      ids: (await tok.encode(text, null, { addSpecialTokens: false })).getIds(),
      ids_special: idsSpecial,
      ids_special_as_text: (await plain.encode(text, null, { addSpecialTokens: false })).getIds(),
      decoded: await tok.decode(idsSpecial, false),
      decoded_skip: await tok.decode(idsSpecial, true),
      stream: await stream(tok, idsSpecial, false),
      stream_skip: await stream(tok, idsSpecial, true),
    });
  }
  const idCases = [];
  for (let i = 0; i < Math.round(60 * scale); i++) {
    const ids = randomIDs(1 + r.int(40));
    idCases.push({
      ids,
      decoded: await tok.decode(ids, false),
      decoded_skip: await tok.decode(ids, true),
      stream: await stream(tok, ids, false),
      stream_skip: await stream(tok, ids, true),
    });
  }
  const gen = 'tokenizers (npm) ' + require('tokenizers/package.json').version;
  const lines = ['{"generator": ' + JSON.stringify(gen) + ', "cases": ['];
  cases.forEach((c, i) => lines.push(JSON.stringify(c) + (i + 1 < cases.length ? ',' : '')));
  lines.push('], "id_cases": [');
  idCases.forEach((c, i) => lines.push(JSON.stringify(c) + (i + 1 < idCases.length ? ',' : '')));
  lines.push(']}');
  fs.writeFileSync(path.join(dir, name, 'reference.json'), lines.join('\n') + '\n');
  console.log(name + ': ' + cases.length + ' texts, ' + idCases.length + ' id sequences');
  // The file's own added tokens: j's special ones were renamed above.
  if (process.env.REALREF_ALLCP) await allCodePoints(dir, name, tok, JSON.parse(json).added_tokens, addedIDs);
}

// allCodePoints writes allcp.jsonl: every code point but the surrogates in
// a few contexts ("x" c "y " c c, " " c "'s1" c "\n" c " \u0301" c), in
// chunks of 8000 pieces, one line a chunk. The pieces of a chunk are joined
// by the special token of lowest id without lstrip, rstrip, single_word or
// normalized (one that neither eats nor joins the pieces beside it), so that
// each is tokenized alone, and the line is {"sep", "text", "ids"}; a file
// with no such token gets each piece encoded alone, {"texts", "ids_list"}.
// About 240 MB and a few minutes a tokenizer.
async function allCodePoints(dir, name, tok, addedTokens, addedIDs) {
  let special = null, specialID = 0;
  addedTokens.forEach((t, i) => {
    if (t.special && !t.lstrip && !t.rstrip && !t.single_word && !t.normalized && (!special || addedIDs[i] < specialID)) {
      special = t; specialID = addedIDs[i];
    }
  });
  const ctx = [(c) => 'x' + c + 'y ' + c + c, (c) => ' ' + c + "'s1" + c + '\n' + c + ' \u0301' + c];
  const out = fs.openSync(path.join(dir, name, 'allcp.jsonl'), 'w');
  let pieces = [];
  const flush = async () => {
    if (special) {
      const text = pieces.join(special.content);
      const ids = (await tok.encode(text, null, { addSpecialTokens: false })).getIds();
      fs.writeSync(out, JSON.stringify({ sep: special.content, text, ids }) + '\n');
    } else {
      const encs = await tok.encodeBatch(pieces, { addSpecialTokens: false });
      fs.writeSync(out, JSON.stringify({ texts: pieces, ids_list: encs.map((e) => e.getIds()) }) + '\n');
    }
    pieces = [];
  };
  for (let cp = 0; cp < 0x110000; cp++) {
    if (cp >= 0xd800 && cp <= 0xdfff) continue;
    for (const f of ctx) pieces.push(f(String.fromCodePoint(cp)));
    if (pieces.length >= 8000) await flush();
  }
  await flush();
  fs.closeSync(out);
  console.log(name + ': allcp.jsonl written');
}

(async () => {
  const dir = process.argv[2];
  if (!dir) throw new Error('usage: node gen_realref.js DIR');
  for (const name of fs.readdirSync(dir).sort()) {
    if (fs.existsSync(path.join(dir, name, 'tokenizer.json'))) await run(dir, name);
  }
})();
