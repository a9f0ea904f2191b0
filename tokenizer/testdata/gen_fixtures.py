#!/usr/bin/env python3
"""Writes the small tokenizer.json fixtures of this directory.

Run from this directory: python3 gen_fixtures.py
Each fixture is a miniature of a real family's tokenizer.json (same
normalizer, pre-tokenizer, post-processor and decoder as the family's file),
with a vocabulary trained here by a plain BPE loop on CORPUS so that merges
are exercised. The expected ids come from the reference implementation (see
gen_reference.js), not from this script.
"""
import collections
import json

CORPUS = """
The quick brown fox jumps over the lazy dog. The dog didn't care; it's lazy.
I'm sure they'll say we've done what we'd planned, and you're right.
func main() { fmt.Println("hello, world") } // prints hello
for i := 0; i < 10; i++ { total += i * 2 }
package main import "strings" return nil, err
Numbers: 12345 678 9 2024 3.14159 1,000,000 and 42.
hello hello hello world world there their the then than
Héllo café naïve résumé über straße
"""

def bytes_to_unicode():
    bs = list(range(ord('!'), ord('~') + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}

B2U = bytes_to_unicode()

def train(words, base, n_merges):
    """words: Counter of tuples of symbols. Returns (vocab list, merges)."""
    vocab = list(base)
    seen = set(vocab)
    merges = []
    words = {tuple(w): c for w, c in words.items()}
    for _ in range(n_merges):
        pairs = collections.Counter()
        for w, c in words.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] += c
        if not pairs:
            break
        (a, b), cnt = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))
        if cnt < 1:
            break
        merges.append([a, b])
        if a + b not in seen:
            seen.add(a + b)
            vocab.append(a + b)
        nw = {}
        for w, c in words.items():
            out = []
            i = 0
            while i < len(w):
                if i + 1 < len(w) and w[i] == a and w[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            nw[tuple(out)] = nw.get(tuple(out), 0) + c
        words = nw
    return vocab, merges

def bl_words(text, prefix_space):
    words = collections.Counter()
    for i, w in enumerate(text.split()):
        s = (' ' + w) if (i > 0 or prefix_space) else w
        words[tuple(B2U[b] for b in s.encode())] += 1
    return words

def added(id_, content, special=True, lstrip=False, rstrip=False, single_word=False, normalized=None):
    return {"id": id_, "content": content, "single_word": single_word, "lstrip": lstrip,
            "rstrip": rstrip, "normalized": (not special) if normalized is None else normalized,
            "special": special}

def bpe_model(vocab, merges, **kw):
    m = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
         "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
         "ignore_merges": False, "vocab": vocab, "merges": merges}
    m.update(kw)
    return m

def write(name, tok, config=None):
    with open(name + '.json', 'w', encoding='utf-8') as f:
        json.dump(tok, f, ensure_ascii=False, indent=1)
        f.write('\n')
    if config is not None:
        with open(name + '.config.json', 'w', encoding='utf-8') as f:
            json.dump(config, f, ensure_ascii=False, indent=1)
            f.write('\n')

def byte_level_vocab(prefix_space, n_merges, specials_first):
    base = [B2U[b] for b in range(256)]
    toks, merges = train(bl_words(CORPUS, prefix_space), base, n_merges)
    vocab = {}
    for s in specials_first:
        vocab[s] = len(vocab)
    for t in toks:
        if t not in vocab:
            vocab[t] = len(vocab)
    return vocab, merges

def tmpl(single_tok, id_):
    return {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": single_tok, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": single_tok, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": single_tok, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {single_tok: {"id": single_tok, "ids": [id_], "tokens": [single_tok]}}}

# 1. GPT-2 style byte-level BPE with add_prefix_space, merges as "a b" strings.
vocab, merges = byte_level_vocab(True, 300, ["<|endoftext|>"])
write("gpt2_prefix", {
    "version": "1.0", "truncation": None, "padding": None,
    "added_tokens": [added(0, "<|endoftext|>")],
    "normalizer": None,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
    "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
    "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
    "model": bpe_model(vocab, [a + " " + b for a, b in merges]),
})

# 2. Llama-3 style: Split(cl100k regex) + ByteLevel(use_regex=false), merges
# as pairs, ignore_merges, BOS template, reserved special tokens.
LLAMA3 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
vocab, merges = byte_level_vocab(False, 300, [])
# A whole word reachable only through ignore_merges (no merge path builds it).
vocab["Ġzyzzyva"] = len(vocab)
n = len(vocab)
specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
            "<|reserved_special_token_1|>", "<|start_header_id|>", "<|end_header_id|>",
            "<|reserved_special_token_2|>", "<|eot_id|>"]
write("llama3_split", {
    "version": "1.0", "truncation": None, "padding": None,
    "added_tokens": [added(n + i, s) for i, s in enumerate(specials)],
    "normalizer": None,
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": LLAMA3}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
    "post_processor": {"type": "Sequence", "processors": [
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        tmpl("<|begin_of_text|>", n)]},
    "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
    "model": bpe_model(vocab, merges, ignore_merges=True),
}, config={
    "bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>",
    "chat_template": "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}",
    "model_max_length": 8192, "tokenizer_class": "PreTrainedTokenizerFast"})

# 3. SentencePiece-style BPE (Llama 2 / Mistral v0.1 conversion): Prepend and
# Replace normalizers, no pre-tokenizer, byte fallback, unk.
def spm_vocab(n_merges, exclude):
    words = collections.Counter()
    for line in CORPUS.split('\n'):
        for w in line.split(' '):
            if w and not set(w) & exclude:
                words[tuple('\u2581' + w)] += 1
    chars = sorted({c for w in words for c in w if c not in exclude})
    base = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)] + chars
    toks, merges = train(words, base, n_merges)
    return {t: i for i, t in enumerate(toks)}, merges

vocab, merges = spm_vocab(250, set("éïüß"))
# The Llama 2 (SentencePiece-style) pipeline's normalizer and model, shared
# by the fixtures built on it.
spm_normalizer = {"type": "Sequence", "normalizers": [
    {"type": "Prepend", "prepend": "\u2581"},
    {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]}
spm_model = bpe_model(vocab, [a + " " + b for a, b in merges], unk_token="<unk>", fuse_unk=True, byte_fallback=True)
spm_decoder = {"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
    {"type": "ByteFallback"}, {"type": "Fuse"},
    {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
write("llama2_spm", {
    "version": "1.0", "truncation": None, "padding": None,
    "added_tokens": [added(0, "<unk>"), added(1, "<s>"), added(2, "</s>")],
    "normalizer": spm_normalizer,
    "pre_tokenizer": None,
    "post_processor": tmpl("<s>", 1),
    "decoder": spm_decoder,
    "model": spm_model,
}, config={"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
           "add_bos_token": True, "add_eos_token": False,
           "chat_template": "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}",
           "tokenizer_class": "LlamaTokenizer"})

# 4. The same vocabulary with the newer conversion: Metaspace pre-tokenizer
# (prepend_scheme "first", no split) and Metaspace decoder, plus a
# non-special added token and [INST] control tokens.
n = len(vocab)
write("mistral_metaspace", {
    "version": "1.0", "truncation": None, "padding": None,
    "added_tokens": [added(0, "<unk>"), added(1, "<s>"), added(2, "</s>"),
                     added(n, "[INST]"), added(n + 1, "[/INST]")],
    "normalizer": None,
    "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": False},
    "post_processor": tmpl("<s>", 1),
    "decoder": {"type": "Sequence", "decoders": [
        {"type": "ByteFallback"},
        {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": False},
        {"type": "Fuse"}]},
    "model": bpe_model(vocab, [[a, b] for a, b in merges], unk_token="<unk>", fuse_unk=True, byte_fallback=True),
})

# 5. Added tokens with lstrip / rstrip / single_word / normalized, on a
# byte-level model (RoBERTa-like <mask> with lstrip).
vocab, merges = byte_level_vocab(False, 200, ["<s>", "</s>", "<pad>"])
n = len(vocab)
write("added_strip", {
    "version": "1.0", "truncation": None, "padding": None,
    "added_tokens": [added(0, "<s>"), added(1, "</s>"), added(2, "<pad>"),
                     added(n, "<mask>", lstrip=True),
                     added(n + 1, "[SEP]", rstrip=True),
                     added(n + 2, "<both>", lstrip=True, rstrip=True),
                     added(n + 3, "word", special=False, single_word=True),
                     added(n + 4, "<mas", special=False),
                     added(n + 5, "ab", special=False, normalized=True),
                     added(n + 6, "<mask>x", special=False, single_word=True)],
    "normalizer": None,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
    "post_processor": {"type": "RobertaProcessing", "sep": ["</s>", 1], "cls": ["<s>", 0], "trim_offsets": True, "add_prefix_space": False},
    "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
    "model": bpe_model(vocab, merges),
})

# 6. Qwen2 style: NFC normalizer, single-digit Split regex, ChatML specials.
QWEN2 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
vocab, merges = byte_level_vocab(False, 250, [])
n = len(vocab)
write("qwen2_nfc", {
    "version": "1.0", "truncation": None, "padding": None,
    "added_tokens": [added(n, "<|endoftext|>"), added(n + 1, "<|im_start|>"), added(n + 2, "<|im_end|>")],
    "normalizer": {"type": "NFC"},
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": QWEN2}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
    "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
    "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
    "model": bpe_model(vocab, merges),
}, config={"bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
           "chat_template": "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}{%- else %}{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}{%- endif %}{%- for message in messages %}{%- if (message.role == \"user\") or (message.role == \"system\" and not loop.first) or (message.role == \"assistant\") %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}{%- endif %}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}",
           "tokenizer_class": "Qwen2Tokenizer"})

# 7. Pre-tokenizer zoo on a character-level vocabulary: Digits, Split with
# every behavior and invert (through regexes that need the general engine),
# Punctuation, Metaspace split, WhitespaceSplit; unk for unknown chars.
chars = sorted(set(CORPUS + "\u2581#"))
vocab = {"[UNK]": 0}
for c in chars:
    if c not in vocab and c != "\n":
        vocab[c] = len(vocab)
def zoo(name, pre, normalizer=None, decoder=None):
    write(name, {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [added(0, "[UNK]")],
        "normalizer": normalizer,
        "pre_tokenizer": pre,
        "post_processor": None,
        "decoder": decoder,
        "model": bpe_model(vocab, [], unk_token="[UNK]"),
    })
zoo("zoo_split", {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"String": ","}, "behavior": "MergedWithPrevious", "invert": False},
    {"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "MergedWithNext", "invert": False},
    {"type": "Split", "pattern": {"Regex": "[aeiou]"}, "behavior": "Contiguous", "invert": False},
    {"type": "Digits", "individual_digits": True}]},
    decoder={"type": "Fuse"})
zoo("zoo_invert", {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": "\\w+(?=\\s)|[.;]"}, "behavior": "Removed", "invert": True},
    {"type": "Punctuation", "behavior": "Isolated"},
    {"type": "Digits", "individual_digits": False}]})
zoo("zoo_metaspace", {"type": "Sequence", "pretokenizers": [
    {"type": "WhitespaceSplit"},
    {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}]},
    normalizer={"type": "Sequence", "normalizers": [{"type": "Lowercase"}, {"type": "Strip", "strip_left": True, "strip_right": True}]},
    decoder={"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True})
zoo("zoo_whitespace", {"type": "Sequence", "pretokenizers": [
    {"type": "CharDelimiterSplit", "delimiter": "x"},
    {"type": "Whitespace"},
    {"type": "Punctuation", "behavior": "Contiguous"}]},
    normalizer={"type": "Sequence", "normalizers": [
        {"type": "NFKC"}, {"type": "Replace", "pattern": {"Regex": "[0-9]+"}, "content": "#"}]},
    decoder={"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"Regex": "a+"}, "content": "A"},
        {"type": "Fuse"},
        {"type": "Strip", "content": "#", "start": 2, "stop": 0}]})

# 8. Special added tokens with normalized=true on the SentencePiece-style
# model (some Llama 2 derived files ship <s> and </s> so): HF matches them in
# the normalized text and decodes them as their normalized form ("▁<s>"),
# which is no special token's content, so skip_special_tokens keeps them.
vocab, merges = spm_vocab(250, set("éïüß"))
n = len(vocab)
write("spm_normspecial", {
    "version": "1.0", "truncation": None, "padding": None,
    "added_tokens": [added(0, "<unk>"), added(1, "<s>", normalized=True), added(2, "</s>", normalized=True),
                     added(n, "<x y>", normalized=True), added(n + 1, "<ctl>", normalized=True),
                     added(n + 2, "<raw>")],
    "normalizer": spm_normalizer,
    "pre_tokenizer": None,
    "post_processor": tmpl("<s>", 1),
    "decoder": spm_decoder,
    "model": spm_model,
})
