// Package tokenizer turns text into token ids and back exactly as the Hugging
// Face tokenizer of a checkpoint does: it reads tokenizer.json (and, when
// present, tokenizer_config.json and generation_config.json), encodes prompts,
// decodes generated ids, streams decoded text token by token, renders chat
// conversations, and names the special and stop tokens. It leaves sampling,
// stop handling and the model to the engine and model packages.
//
// # Pipeline
//
// Encode follows HF tokenizers' TokenizerImpl::encode_single_sequence, stage
// by stage, each stage named after the tokenizer.json component it reads:
//
//  1. added_tokens: matched in the raw text first, leftmost-longest, with
//     their lstrip, rstrip, single_word, normalized and special flags
//     (AddedVocabulary::find_matches). Tokens with normalized=true are matched
//     afterwards in the normalized text. EncodeOptions.SpecialAsText keeps
//     special tokens as plain text (HF's split_special_tokens).
//  2. normalizer, applied to each piece between added tokens: Prepend,
//     Replace (string or regex), Sequence, Lowercase, Strip, StripAccents, and
//     the Unicode forms NFC, NFD, NFKC, NFKD (Qwen2 and Qwen2.5 use NFC). Go's
//     standard library has no Unicode normalization and this module takes no
//     new dependency for it, so unorm.go implements UAX #15 over tables
//     generated from Python's unicodedata (gen_unorm.py), less the
//     decompositions and combining classes that the reference's older
//     tables lack: the four forms give HF's result on every code point.
//  3. pre_tokenizer: ByteLevel (add_prefix_space, use_regex with the GPT-2
//     regex), Split (String or Regex pattern; Removed, Isolated,
//     MergedWithPrevious, MergedWithNext, Contiguous; invert), Metaspace
//     (replacement, prepend_scheme first/always/never, split), Digits
//     (individual_digits), Whitespace, WhitespaceSplit, Punctuation,
//     CharDelimiterSplit, Sequence.
//  4. model: BPE only, with merges as "a b" strings or [a, b] pairs,
//     byte_fallback, ignore_merges (Llama 3), unk_token and fuse_unk,
//     continuing_subword_prefix and end_of_word_suffix. The merge loop is
//     word.rs's merge_all (a priority queue on rank then position, with its
//     stale-entry rule), behind a word cache. WordPiece, Unigram and WordLevel
//     models are rejected with an error wrapping ErrUnsupported; LLMs that
//     ship SentencePiece models (Llama 2, Mistral, Gemma) ship them converted
//     to BPE in tokenizer.json. A checkpoint without tokenizer.json (custom
//     code over a SentencePiece tokenizer.model, as ChatGLM3's, Baichuan 2's
//     and InternLM2's repositories have, a tiktoken file, a WordPiece
//     vocab.txt) gets an error from Load naming what it has instead.
//  5. post_processor, when Encode is asked for special tokens:
//     TemplateProcessing (single template), RobertaProcessing,
//     BertProcessing, ByteLevel (offsets only: nothing to do for ids),
//     Sequence. As transformers v5 does, when tokenizer_config.json sets
//     add_bos_token or add_eos_token (or tokenizer.json has no
//     post-processor) the template becomes [BOS] text [EOS] from those flags.
//
// Decode maps ids to their tokens (added tokens with normalized=true by their
// normalized form), drops special tokens if asked (as HF does, by that
// string: a special token with normalized=true whose normalized form is no
// special token's content, "▁<s>" under a Prepend normalizer, is kept), and
// runs the decoder:
// ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace, BPEDecoder,
// Sequence; without a decoder tokens are joined by spaces, as in HF. Invalid
// UTF-8 becomes U+FFFD the way Rust's from_utf8_lossy does it. DecodeStream
// is HF's DecodeStream: it emits only complete characters and keeps the
// first-token rules of Metaspace and SentencePiece decoders.
//
// # Regexes
//
// The pre-tokenizer regexes of GPT-2 (built into ByteLevel), Llama 3 / GPT-4
// (cl100k) and Qwen2 need a negative lookahead, which Go's regexp lacks. Those
// three patterns are recognized and run by hand-written scanners (regex.go
// explains the translation and the measurements: about 12 times faster than
// regexp2 on the same pattern); every other pattern runs on
// github.com/dlclark/regexp2. HF compiles patterns with Oniguruma; the
// scanners follow its Unicode 16.0 classes and its case folding exactly,
// while regexp2 follows .NET semantics, adjusted for \w (see onigToDotNet).
//
// # Chat templates
//
// A checkpoint's chat template (tokenizer_config.json's chat_template, a
// string or a list of named templates, or chat_template.jinja, which wins)
// is rendered by the Jinja2 interpreter of package tokenizer/jinja exactly
// as transformers' apply_chat_template renders it: trim_blocks and
// lstrip_blocks, HF's tojson (ensure_ascii=False, key order kept),
// raise_exception, strftime_now, loop controls, jinja2's default Undefined,
// with the variables messages, tools, documents (None when empty),
// add_generation_prompt, the special tokens of tokenizer_config.json, and
// ChatOptions.Extra (e.g. enable_thinking). Messages carry what tool-use
// templates read: tool_calls (arguments as a mapping), tool_call_id, name,
// reasoning_content, and content None. With tools, a "tool_use" named
// template is chosen when there is one. The rendered text is encoded
// without the post-processor's tokens (add_special_tokens=False), since the
// templates write bos_token themselves. A template that does not compile or
// fails (raise_exception included) is an error naming its line, never a
// silent fallback. tools/chatcheck compares the renderings with
// transformers' on real templates (bench/results/2026-11-26-jinja-17).
//
// Without a template, a built-in format is chosen by the special tokens of
// the vocabulary (Llama 3, ChatML, Mistral [INST]) or the plain fallback;
// the built-ins (also Llama 2, Gemma, and the Llama 3.1+ system header)
// remain available through ChatOptions.Format. ChatTemplate says which was
// chosen and why, for the CLI to print. ChatOptions.ContentSpecialAsText
// stops users from injecting control tokens through message contents
// (including tool results and tool-call arguments): while the template
// renders, the special tokens in them are replaced by placeholders, which
// become text spans EncodeChat keeps as text.
//
// # Checked against the reference
//
// The tests compare ids and texts with the reference implementation itself
// (HF tokenizers 0.23 through its Node binding, see testdata/gen_reference.js)
// on hand-built fixtures of each family (testdata/gen_fixtures.py) and on the
// repository's gocoder-23m checkpoint, whose golden.json ids and texts come
// from transformers. During development the same comparison ran on about
// 100,000 random strings over every fixture, normalization form and a
// regexp2-only pattern, and on a synthetic 128k-token Llama-3-style
// vocabulary over heldout.txt (1.9 million tokens), without a difference.
// TestRealTokenizers compares Encode, Decode and DecodeStream the same way
// on real tokenizer.json files (Llama 2, 3, 3.1, Gemma, Gemma 3, Qwen3,
// o200k, and composites of the other families) where BITDECODE_REALTOK_DIR
// names them (testdata/realtok_dir.py, testdata/gen_realref.js;
// docs/conformance.md, session 26).
//
// # Speed
//
// Encoding heldout.txt (2.86 MB of Go source, 1.1 million tokens) with the
// gocoder-23m tokenizer takes 0.15-0.21 s, with a cold or a warm word cache,
// on the 2-core development machine (BenchmarkEncodeHeldout); loading that
// tokenizer takes 25-35 ms, a 128k-token vocabulary about 0.5 s.
//
// # Known differences from HF
//
//   - BPE dropout is ignored: it is a training device that makes ids random.
//   - Only single sequences: no pair templates, truncation, padding or
//     offsets.
//   - Text with invalid UTF-8 (which HF cannot receive) is first made valid
//     with U+FFFD.
//   - VocabSize is one more than the largest id, not HF's count of tokens.
//   - Patterns run by regexp2 may still split rare characters differently
//     from Oniguruma (case folding of U+017F; \P{Cat} inside brackets and
//     \p{Mn} keep Go's Unicode 15.0 classes); the three common patterns do
//     not go through it, and o200k's (Phi-4-mini) and Mistral Nemo's split
//     every code point as the reference does.
//   - Metaspace prepend_scheme "first" decides from the piece's position in
//     the input; HF's offset arithmetic differs when a Prepend normalizer
//     precedes it, a combination no released tokenizer uses.
//   - DecodeStream returns the text after the common prefix where HF would
//     return an error (a decoder that rewrites earlier text), and has a
//     Flush for the end of a sequence.
package tokenizer
