package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/bitdecode/bitdecode/internal/fileio"
)

// File names read by Load from a checkpoint directory.
const (
	// TokenizerFile is the HF tokenizers serialization (required).
	TokenizerFile = "tokenizer.json"
	// TokenizerConfigFile is transformers' tokenizer settings (optional).
	TokenizerConfigFile = "tokenizer_config.json"
	// GenerationConfigFile is transformers' generation settings (optional).
	GenerationConfigFile = "generation_config.json"
	// ChatTemplateFile is the chat template transformers v4.43+ saves beside
	// tokenizer_config.json (optional); it takes precedence over
	// tokenizer_config.json's chat_template, as in transformers.
	ChatTemplateFile = "chat_template.jinja"
	// ProcessorChatTemplateFile is a multimodal checkpoint's processor
	// template, {"chat_template": "..."} (optional): used where neither
	// chat_template.jinja nor tokenizer_config.json has a template.
	ProcessorChatTemplateFile = "chat_template.json"
)

// maxTokenID bounds token ids read from files (16M, far above any real
// vocabulary), so that hostile ids cannot make the loader allocate much.
const maxTokenID = 1<<24 - 1

// Files holds the contents of a checkpoint's tokenizer files. Only Tokenizer
// is required; the others may be nil.
type Files struct {
	Tokenizer        []byte // tokenizer.json
	TokenizerConfig  []byte // tokenizer_config.json: bos/eos, add_bos_token, chat_template
	GenerationConfig []byte // generation_config.json: eos_token_id (stop tokens)
	ChatTemplate     []byte // chat_template.jinja: the chat template, overriding tokenizer_config.json's
	// ProcessorChatTemplate is chat_template.json (a multimodal
	// checkpoint's processor template), the last resort.
	ProcessorChatTemplate []byte
}

// Tokenizer encodes text to token ids and decodes them back, as the Hugging
// Face tokenizer described by a tokenizer.json does. It is safe for
// concurrent use.
type Tokenizer struct {
	model   *bpe
	norm    normalizer   // nil: none
	pre     preTokenizer // nil: none
	dec     decoder      // nil: tokens joined with spaces, as HF does
	added   addedVocab
	post    postProcessor
	idToTok []string // model and added tokens by id ("" where none)
	hasID   []bool

	bos, eos int // -1 when unknown
	stop     []int
	chat     ChatTemplate
	cfg      tokenizerConfig
	jinja    jinjaTemplates
}

// EncodeOptions controls EncodeWith.
type EncodeOptions struct {
	// AddSpecial adds the tokens of the post-processor (BOS, EOS, ...), as
	// HF's add_special_tokens=True.
	AddSpecial bool
	// SpecialAsText encodes special tokens that appear in the text as plain
	// text, as HF's split_special_tokens=True: "<|begin_of_text|>" typed by a
	// user becomes "<", "|", "begin", ... instead of the control token.
	// Added tokens that are not special are still matched.
	SpecialAsText bool
}

// DecodeOptions controls DecodeWith and DecodeStream.
type DecodeOptions struct {
	// SkipSpecial drops special tokens, as HF's skip_special_tokens=True.
	SkipSpecial bool
}

// Limits on the files Load reads: the largest real tokenizer.json files are
// tens of MB (Gemma's is 33 MB); the configs are small.
const (
	MaxTokenizerBytes = 256 << 20
	MaxConfigBytes    = 16 << 20
)

// Load reads a tokenizer from a checkpoint directory (tokenizer.json, and
// tokenizer_config.json and generation_config.json when present) or from the
// path of a tokenizer.json file (then the other two are looked for beside it).
// A directory without tokenizer.json gives an error that wraps
// fs.ErrNotExist and names the tokenizer the checkpoint has instead (its
// tokenizer_class, custom code, a SentencePiece, tiktoken, WordPiece or
// vocab.json/merges.txt file), wrapping ErrUnsupported too when it finds one.
func Load(path string) (*Tokenizer, error) {
	dir := path
	st, err := os.Stat(path)
	switch {
	case err == nil && !st.IsDir(), err != nil && strings.EqualFold(filepath.Ext(path), ".json"):
		dir = filepath.Dir(path)
	default:
		path = filepath.Join(dir, TokenizerFile)
	}
	var f Files
	if f.Tokenizer, err = fileio.ReadFile(path, MaxTokenizerBytes); err != nil {
		if errors.Is(err, fs.ErrNotExist) && filepath.Base(path) == TokenizerFile {
			return nil, noTokenizerJSON(dir, err)
		}
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	read := func(name string) ([]byte, error) {
		b, err := fileio.ReadFile(filepath.Join(dir, name), MaxConfigBytes)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
		return b, nil
	}
	if f.TokenizerConfig, err = read(TokenizerConfigFile); err != nil {
		return nil, err
	}
	if f.GenerationConfig, err = read(GenerationConfigFile); err != nil {
		return nil, err
	}
	if f.ChatTemplate, err = read(ChatTemplateFile); err != nil {
		return nil, err
	}
	if f.ProcessorChatTemplate, err = read(ProcessorChatTemplateFile); err != nil {
		return nil, err
	}
	return New(f)
}

// noTokenizerJSON builds Load's error for a directory without
// tokenizer.json (err, which it wraps): it names what the directory holds
// instead, from tokenizer_config.json's tokenizer_class and auto_map and the
// tokenizer files of transformers' slow tokenizers.
func noTokenizerJSON(dir string, err error) error {
	var has []string
	if b, rerr := fileio.ReadFile(filepath.Join(dir, TokenizerConfigFile), MaxConfigBytes); rerr == nil {
		var c struct {
			Class   any `json:"tokenizer_class"`
			AutoMap struct {
				AutoTokenizer any `json:"AutoTokenizer"`
			} `json:"auto_map"`
		}
		if json.Unmarshal(b, &c) == nil {
			if class, ok := c.Class.(string); ok && class != "" {
				has = append(has, "tokenizer_config.json's tokenizer_class "+class)
			}
			// auto_map's AutoTokenizer: "module.Class" or [slow, fast].
			var code []string
			switch v := c.AutoMap.AutoTokenizer.(type) {
			case string:
				code = append(code, v)
			case []any:
				for _, e := range v {
					if s, ok := e.(string); ok && s != "" {
						code = append(code, s)
					}
				}
			}
			if len(code) > 0 {
				has = append(has, "custom Python code ("+strings.Join(code, ", ")+" in auto_map)")
			}
		}
	}
	entries, _ := os.ReadDir(dir)
	names := map[string]bool{}
	for _, e := range entries {
		names[e.Name()] = true
	}
	for _, e := range entries {
		switch n := e.Name(); {
		case strings.Contains(strings.ToLower(n), "tiktoken"):
			has = append(has, "a tiktoken vocabulary ("+n+")")
		case strings.HasSuffix(n, ".model"):
			has = append(has, "a SentencePiece model ("+n+")")
		case n == "vocab.txt":
			has = append(has, "a WordPiece vocabulary (vocab.txt)")
		case n == "vocab.json" && names["merges.txt"]:
			has = append(has, "a byte-level BPE's vocab.json and merges.txt")
		}
	}
	if len(has) == 0 {
		return fmt.Errorf("tokenizer: %s has no %s (%w) and no other tokenizer file; this package reads tokenizer.json (Hugging Face tokenizers' serialization)", dir, TokenizerFile, err)
	}
	return fmt.Errorf("tokenizer: %s has no %s (%w), the only tokenizer file this package reads (Hugging Face tokenizers' serialization); it has %s instead: %w; a tokenizer.json converted from it would be read",
		dir, TokenizerFile, err, strings.Join(has, ", "), ErrUnsupported)
}

// New builds a tokenizer from the contents of its files. Malformed, truncated
// or unsupported input gives a *LoadError naming the file and field.
func New(f Files) (*Tokenizer, error) {
	t := &Tokenizer{bos: -1, eos: -1}
	root, err := rootNode(TokenizerFile, f.Tokenizer).object()
	if err != nil {
		return nil, err
	}
	if v := root.get("version"); !v.isNull() {
		s, err := v.str()
		if err != nil {
			return nil, err
		}
		if s != "1.0" {
			return nil, v.errorf("unknown tokenizer.json version %q (want 1.0)", s)
		}
	}

	// Model.
	mn := root.get("model")
	mo, err := mn.object()
	if err != nil {
		return nil, err
	}
	typ := "BPE"
	if tn := mo.get("type"); !tn.isNull() {
		if typ, err = tn.str(); err != nil {
			return nil, err
		}
	} else if !mo.has("merges") {
		typ = "(untyped, no merges)"
	}
	if typ != "BPE" {
		return nil, mo.get("type").wrap(unsupported("model", typ, "BPE, as used by Llama, Mistral, Qwen, GPT-2 style byte-level and SentencePiece-converted tokenizers"))
	}
	if t.model, err = parseBPE(mo); err != nil {
		return nil, err
	}

	if n := root.get("normalizer"); !n.isNull() {
		if t.norm, err = parseNormalizer(n, 0); err != nil {
			return nil, err
		}
	}
	if n := root.get("pre_tokenizer"); !n.isNull() {
		if t.pre, err = parsePreTokenizer(n, 0); err != nil {
			return nil, err
		}
	}
	if n := root.get("decoder"); !n.isNull() {
		if t.dec, err = parseDecoder(n, 0); err != nil {
			return nil, err
		}
	}

	// Added tokens, with the ids HF's AddedVocabulary::add_tokens assigns.
	var added []AddedToken
	if n := root.get("added_tokens"); !n.isNull() {
		if added, err = parseAddedTokens(n); err != nil {
			return nil, err
		}
	}
	t.added = addedVocab{byID: map[int32]int{}, content: map[string]int32{}, decodeAs: map[int32]string{}}
	t.addTokens(added)

	// Post-processor from tokenizer.json.
	var postPresent bool
	if n := root.get("post_processor"); !n.isNull() {
		postPresent = true
		if t.post, err = parsePostProcessor(n, 0, t); err != nil {
			return nil, err
		}
	}

	// tokenizer_config.json and generation_config.json.
	if f.TokenizerConfig != nil {
		if t.cfg, err = parseTokenizerConfig(f.TokenizerConfig); err != nil {
			return nil, err
		}
		t.addTokens(t.cfg.addedTokens)
		t.addNamedSpecials()
	}
	gen := generationConfig{bos: -1} // none: no bos_token_id
	if f.GenerationConfig != nil {
		if gen, err = parseGenerationConfig(f.GenerationConfig); err != nil {
			return nil, err
		}
	}
	t.buildTries()
	if err := t.buildIDTable(); err != nil {
		return nil, err
	}
	for _, id := range append(append([]int32(nil), t.post.pre...), t.post.post...) {
		if int(id) >= len(t.idToTok) || !t.hasID[id] {
			return nil, &LoadError{File: TokenizerFile, Field: "post_processor",
				Err: fmt.Errorf("special token id %d is not in the vocabulary", id)}
		}
	}
	t.resolveSpecials(gen)

	// transformers (v5, TokenizersBackend) rebuilds the post-processor from
	// add_bos_token/add_eos_token when tokenizer_config.json sets either, or
	// when tokenizer.json has none.
	if f.TokenizerConfig != nil && (t.cfg.hasAddBOS || t.cfg.hasAddEOS || !postPresent) {
		t.post = postProcessor{}
		if t.cfg.addBOS && t.bos >= 0 {
			t.post.pre = []int32{int32(t.bos)}
		}
		if t.cfg.addEOS && t.eos >= 0 {
			t.post.post = []int32{int32(t.eos)}
		}
	}
	if f.ChatTemplate != nil {
		t.cfg.chatTemplate = string(f.ChatTemplate)
		t.cfg.chatTemplates = nil
	} else if f.ProcessorChatTemplate != nil && t.cfg.chatTemplate == "" && len(t.cfg.chatTemplates) == 0 {
		var p struct {
			ChatTemplate *string `json:"chat_template"`
		}
		if err := json.Unmarshal(f.ProcessorChatTemplate, &p); err != nil || p.ChatTemplate == nil {
			return nil, &LoadError{File: ProcessorChatTemplateFile, Err: fmt.Errorf("want an object with a chat_template string: %v", err)}
		}
		t.cfg.chatTemplate = *p.ChatTemplate
	}
	t.chat = chooseChatTemplate(t.cfg.chatTemplate, t.hasAddedToken)
	t.initJinja()
	return t, nil
}

func parseAddedTokens(n jnode) ([]AddedToken, error) {
	list, err := n.array()
	if err != nil {
		return nil, err
	}
	out := make([]AddedToken, 0, len(list))
	for _, e := range list {
		at, err := parseAddedToken(e, true)
		if err != nil {
			return nil, err
		}
		out = append(out, at)
	}
	return out, nil
}

// parseAddedToken decodes an AddedToken object; the id is required in
// tokenizer.json and comes from the map key in tokenizer_config.json.
func parseAddedToken(e jnode, needID bool) (AddedToken, error) {
	o, err := e.object()
	if err != nil {
		return AddedToken{}, err
	}
	var at AddedToken
	if needID {
		if at.ID, err = o.get("id").integer(maxTokenID); err != nil {
			return at, err
		}
	}
	if at.Content, err = o.get("content").str(); err != nil {
		return at, err
	}
	if at.Special, err = o.get("special").boolOr(false); err != nil {
		return at, err
	}
	if at.SingleWord, err = o.get("single_word").boolOr(false); err != nil {
		return at, err
	}
	if at.LStrip, err = o.get("lstrip").boolOr(false); err != nil {
		return at, err
	}
	if at.RStrip, err = o.get("rstrip").boolOr(false); err != nil {
		return at, err
	}
	if at.Normalized, err = o.get("normalized").boolOr(!at.Special); err != nil {
		return at, err
	}
	return at, nil
}

// addTokens is AddedVocabulary::add_tokens: a token whose content is already
// known (added or in the model vocabulary) takes that id; others get ids
// from the end of the vocabulary on, in order. The id written in the file is
// not used, exactly as in HF (which only warns when it differs).
func (t *Tokenizer) addTokens(toks []AddedToken) {
	next := int32(len(t.model.vocab))
	maxAdded := int32(-1)
	for id := range t.added.byID {
		maxAdded = max(maxAdded, id)
	}
	if maxAdded >= 0 && (maxAdded >= next || len(t.model.vocab) == 0) {
		next = maxAdded + 1
	}
	for _, at := range toks {
		if at.Content == "" {
			continue
		}
		id, ok := t.added.content[at.Content]
		if !ok {
			id, ok = t.model.vocab[at.Content]
		}
		if !ok {
			id = next
			next++
		}
		at.ID = int(id)
		t.added.content[at.Content] = id
		if i, ok := t.added.byID[id]; ok {
			t.added.tokens[i] = at
		} else {
			t.added.byID[id] = len(t.added.tokens)
			t.added.tokens = append(t.added.tokens, at)
		}
	}
}

// addNamedSpecials registers tokenizer_config.json's named special tokens
// (bos, eos, unk, pad) as special added tokens when they are only in the
// model vocabulary, as transformers does, so that they are matched in text
// and skipped by SkipSpecial.
func (t *Tokenizer) addNamedSpecials() {
	var toks []AddedToken
	for _, c := range []string{t.cfg.bosToken, t.cfg.eosToken, t.cfg.unkToken, t.cfg.padToken} {
		if c == "" {
			continue
		}
		if _, ok := t.added.content[c]; ok {
			continue
		}
		if _, ok := t.model.vocab[c]; ok {
			toks = append(toks, AddedToken{Content: c, Special: true})
		}
	}
	t.addTokens(toks)
}

// buildTries builds the matchers of the added tokens and, for normalized
// ones, the normalized content they match and decode as.
func (t *Tokenizer) buildTries() {
	av := &t.added
	for _, at := range av.tokens {
		id := int32(at.ID)
		if at.Normalized {
			c := at.Content
			if t.norm != nil {
				if nc := t.norm.normalize(c); nc != c {
					av.decodeAs[id] = nc
					c = nc
				}
			}
			if av.norm == nil {
				av.norm = newTrie()
			}
			av.norm.insert(c, id)
		} else {
			if av.raw == nil {
				av.raw = newTrie()
			}
			av.raw.insert(at.Content, id)
		}
	}
}

// buildIDTable fills the id -> token table; ids must be reasonably dense.
func (t *Tokenizer) buildIDTable() error {
	maxID, count := -1, len(t.model.vocab)+len(t.added.tokens)
	for _, id := range t.model.vocab {
		maxID = max(maxID, int(id))
	}
	for _, at := range t.added.tokens {
		maxID = max(maxID, at.ID)
	}
	if maxID >= 4*count+1024 {
		return &LoadError{File: TokenizerFile, Field: "model.vocab",
			Err: fmt.Errorf("token ids are sparse: largest id %d for %d tokens", maxID, count)}
	}
	t.idToTok = make([]string, maxID+1)
	t.hasID = make([]bool, maxID+1)
	for tok, id := range t.model.vocab {
		// Two tokens with one id: keep a deterministic one (the smaller).
		if t.hasID[id] && t.idToTok[id] < tok {
			continue
		}
		t.idToTok[id], t.hasID[id] = tok, true
	}
	for _, at := range t.added.tokens {
		t.idToTok[at.ID], t.hasID[at.ID] = at.Content, true
	}
	return nil
}

func (t *Tokenizer) hasAddedToken(s string) bool {
	_, ok := t.added.content[s]
	return ok
}

// endOfTurnTokens are tokens that end a turn in the chat formats of common
// model families; those present as added tokens are stop tokens.
var endOfTurnTokens = []string{
	"<|eot_id|>", "<|eom_id|>", "<|end_of_text|>", // Llama 3
	"<|im_end|>", "<|endoftext|>", // ChatML (Qwen), GPT-2
	"<end_of_turn>", // Gemma
	"<|end|>",       // Phi-3
}

// resolveSpecials finds BOS, EOS and the stop tokens.
func (t *Tokenizer) resolveSpecials(gen generationConfig) {
	lookup := func(s string) int {
		if id, ok := t.TokenToID(s); ok && s != "" {
			return id
		}
		return -1
	}
	t.bos, t.eos = lookup(t.cfg.bosToken), lookup(t.cfg.eosToken)
	if t.bos < 0 && gen.bos >= 0 && gen.bos < len(t.idToTok) && t.hasID[gen.bos] {
		t.bos = gen.bos
	}
	if t.eos < 0 && len(gen.eos) > 0 && gen.eos[0] < len(t.idToTok) && t.hasID[gen.eos[0]] {
		t.eos = gen.eos[0]
	}
	if t.bos < 0 && len(t.post.pre) > 0 {
		// No configuration: the token the post-processor puts first.
		t.bos = int(t.post.pre[0])
	}
	seen := map[int]bool{}
	addStop := func(id int) {
		if id >= 0 && id < len(t.idToTok) && t.hasID[id] && !seen[id] {
			seen[id] = true
			t.stop = append(t.stop, id)
		}
	}
	addStop(t.eos)
	for _, id := range gen.eos {
		addStop(id)
	}
	for _, s := range endOfTurnTokens {
		if id, ok := t.added.content[s]; ok {
			addStop(int(id))
		}
	}
	sort.Ints(t.stop)
}

// Encode returns the token ids of text; addSpecial adds the post-processor's
// tokens (BOS for Llama-style models), as HF's add_special_tokens. Special
// tokens written in text are recognized. Invalid UTF-8 in text is replaced by
// U+FFFD first.
func (t *Tokenizer) Encode(text string, addSpecial bool) []int {
	return t.EncodeWith(text, EncodeOptions{AddSpecial: addSpecial})
}

// EncodeWith returns the token ids of text under opts.
func (t *Tokenizer) EncodeWith(text string, opts EncodeOptions) []int {
	var protect protectFunc
	if opts.SpecialAsText {
		protect = func(int, int) bool { return true }
	}
	return t.encode(text, opts.AddSpecial, protect)
}

func (t *Tokenizer) encode(text string, addSpecial bool, protect protectFunc) []int {
	text = strings.ToValidUTF8(text, "\uFFFD")
	ids := make([]int32, 0, len(text)/3+4)
	if addSpecial {
		ids = append(ids, t.post.pre...)
	}

	// 1. Added tokens matched in the raw text.
	root := piece{s: text, id: -1, first: true}
	var pieces []piece
	if t.added.raw != nil {
		pieces = t.added.split(t.added.raw, root, 0, protect, nil)
	} else {
		pieces = []piece{root}
	}

	// 2. Normalization of the text between them, then the added tokens
	// matched in normalized text. Offsets into the raw text are needed for
	// protect; a normalized piece is protected when its raw piece is.
	if t.norm != nil || t.added.norm != nil {
		out := make([]piece, 0, len(pieces))
		off := 0
		for _, p := range pieces {
			rawOff := off
			off += len(p.s)
			if p.id >= 0 {
				out = append(out, p)
				continue
			}
			q := p
			if t.norm != nil {
				q.s = t.norm.normalize(p.s)
			}
			if t.added.norm == nil {
				out = append(out, q)
				continue
			}
			var pr protectFunc
			if protect != nil {
				rawLen := len(p.s)
				pr = func(int, int) bool { return protect(rawOff, rawOff+rawLen) }
			}
			out = t.added.split(t.added.norm, q, 0, pr, out)
		}
		pieces = out
	}

	// 3. Pre-tokenization.
	if t.pre != nil {
		pieces = t.pre.preTokenize(make([]piece, 0, len(pieces)+len(text)/3), pieces)
	}

	// 4. The model.
	for _, p := range pieces {
		if p.id >= 0 {
			ids = append(ids, p.id)
			continue
		}
		ids = t.model.tokenize(p.s, ids)
	}

	// 5. Post-processing.
	if addSpecial {
		ids = append(ids, t.post.post...)
	}
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = int(id)
	}
	return out
}

// Decode returns the text of ids, special tokens included (HF's
// skip_special_tokens=False). Ids that name no token are skipped.
func (t *Tokenizer) Decode(ids []int) string {
	return t.DecodeWith(ids, DecodeOptions{})
}

// DecodeWith returns the text of ids under opts.
func (t *Tokenizer) DecodeWith(ids []int, opts DecodeOptions) string {
	toks := make([]string, 0, len(ids))
	for _, id := range ids {
		s, ok := t.decodeToken(id, opts.SkipSpecial)
		if ok {
			toks = append(toks, s)
		}
	}
	if t.dec == nil {
		return strings.Join(toks, " ")
	}
	return strings.Join(t.dec.decodeChain(toks), "")
}

// decodeToken returns the string id decodes as, and false for an id that
// names no token or that skipSpecial drops.
func (t *Tokenizer) decodeToken(id int, skipSpecial bool) (string, bool) {
	if id < 0 || id >= len(t.idToTok) || !t.hasID[id] {
		return "", false
	}
	s := t.idToTok[id]
	if i, ok := t.added.byID[int32(id)]; ok {
		s = t.added.tokens[i].Content
		if d, ok := t.added.decodeAs[int32(id)]; ok {
			s = d
		}
	}
	// HF drops a token when the string it decodes as is the content of a
	// special token (AddedVocabulary::is_special_token on the string): a
	// special token with normalized=true whose normalized form differs from
	// its content is kept.
	if skipSpecial && t.isSpecialContent(s) {
		return "", false
	}
	return s, true
}

// isSpecialContent reports whether s is the content of a special added token.
func (t *Tokenizer) isSpecialContent(s string) bool {
	id, ok := t.added.content[s]
	return ok && t.added.tokens[t.added.byID[id]].Special
}

// VocabSize returns the number of token ids: one more than the largest id of
// the model vocabulary and the added tokens. (HF's get_vocab_size counts
// tokens instead; the two differ only when ids have gaps.)
func (t *Tokenizer) VocabSize() int { return len(t.idToTok) }

// TokenToID returns the id of a token given as it is stored in the
// vocabulary (byte-level tokens in their mapped form, e.g. "Ġthe").
func (t *Tokenizer) TokenToID(tok string) (int, bool) {
	if id, ok := t.added.content[tok]; ok {
		return int(id), true
	}
	if id, ok := t.model.vocab[tok]; ok {
		return int(id), true
	}
	return 0, false
}

// IDToToken returns the token with the given id as stored in the vocabulary.
func (t *Tokenizer) IDToToken(id int) (string, bool) {
	if id < 0 || id >= len(t.idToTok) || !t.hasID[id] {
		return "", false
	}
	return t.idToTok[id], true
}

// BOS returns the beginning-of-sequence token id: tokenizer_config.json's
// bos_token, else generation_config.json's bos_token_id, else the first token
// the post-processor adds.
func (t *Tokenizer) BOS() (int, bool) { return t.bos, t.bos >= 0 }

// EOS returns the end-of-sequence token id: tokenizer_config.json's
// eos_token, else the first of generation_config.json's eos_token_id.
func (t *Tokenizer) EOS() (int, bool) { return t.eos, t.eos >= 0 }

// StopIDs returns, in increasing order, the ids that end generation: EOS,
// every generation_config.json eos_token_id, and the end-of-turn tokens of
// common chat formats present as added tokens (<|eot_id|>, <|im_end|>,
// <|end_of_text|>, <end_of_turn>, ...).
func (t *Tokenizer) StopIDs() []int { return append([]int(nil), t.stop...) }

// IsSpecial reports whether id is a special added token.
func (t *Tokenizer) IsSpecial(id int) bool {
	i, ok := t.added.byID[int32(id)]
	return ok && t.added.tokens[i].Special
}

// AddedTokens returns the added tokens, ordered by id.
func (t *Tokenizer) AddedTokens() []AddedToken {
	out := append([]AddedToken(nil), t.added.tokens...)
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// SpecialIDs returns the ids the post-processor adds before and after the
// text when Encode is called with addSpecial.
func (t *Tokenizer) SpecialIDs() (before, after []int) {
	for _, id := range t.post.pre {
		before = append(before, int(id))
	}
	for _, id := range t.post.post {
		after = append(after, int(id))
	}
	return before, after
}
