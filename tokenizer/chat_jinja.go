package tokenizer

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/bitdecode/bitdecode/tokenizer/jinja"
)

// jinjaTemplates are the checkpoint's chat templates, compiled.
type jinjaTemplates struct {
	def   *jinja.Template // the default (or only) template
	named map[string]*jinja.Template
	err   error // why the template did not compile
	// specials are the contents of the special added tokens, for
	// ContentSpecialAsText; longest first.
	specials []string
}

// initJinja compiles the chat templates of the tokenizer config.
func (t *Tokenizer) initJinja() {
	if t.chat.Format != ChatJinja {
		return
	}
	compile := func(name, src string) *jinja.Template {
		tmpl, err := jinja.Compile(src)
		if err != nil && t.jinja.err == nil {
			if name != "" {
				name = " " + name
			}
			t.jinja.err = fmt.Errorf("tokenizer: chat template%s: %w", name, err)
		}
		return tmpl
	}
	t.jinja.def = compile("", t.cfg.chatTemplate)
	if len(t.cfg.chatTemplates) > 0 {
		t.jinja.named = map[string]*jinja.Template{}
		names := make([]string, 0, len(t.cfg.chatTemplates))
		for n := range t.cfg.chatTemplates {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if tmpl := compile(fmt.Sprintf("%q", n), t.cfg.chatTemplates[n]); tmpl != nil {
				t.jinja.named[n] = tmpl
			}
		}
	}
	for _, a := range t.added.tokens {
		if a.Special && a.Content != "" {
			t.jinja.specials = append(t.jinja.specials, a.Content)
		}
	}
	sort.SliceStable(t.jinja.specials, func(i, j int) bool { return len(t.jinja.specials[i]) > len(t.jinja.specials[j]) })
}

// Content markers: with ContentSpecialAsText, each special token written in
// a message is replaced, while the template renders, by markerLead followed
// by one private-use character naming it; the rendered text gets the token
// back and a span that EncodeChat keeps as text. markerLead is a
// noncharacter, which no text exchanged between programs holds; one typed in
// a message becomes U+FFFD.
const (
	markerLead  = '\U0010FFFE'
	markerFirst = 0x100000 // private-use plane 16
	maxMarkers  = 0xFFFD
)

// chooseJinja picks the template to render, as transformers does.
func (t *Tokenizer) chooseJinja(opts ChatOptions) (*jinja.Template, error) {
	if t.jinja.err != nil {
		return nil, t.jinja.err
	}
	if opts.Template != "" {
		tmpl, ok := t.jinja.named[opts.Template]
		if !ok {
			return nil, fmt.Errorf("tokenizer: the checkpoint has no chat template named %q", opts.Template)
		}
		return tmpl, nil
	}
	if len(opts.Tools) > 0 {
		if tmpl, ok := t.jinja.named["tool_use"]; ok {
			return tmpl, nil
		}
	}
	if t.jinja.named != nil {
		if tmpl, ok := t.jinja.named["default"]; ok {
			return tmpl, nil
		}
		if len(t.jinja.named) > 1 {
			return nil, fmt.Errorf("tokenizer: the checkpoint has several chat templates and none named \"default\" (set ChatOptions.Template)")
		}
	}
	return t.jinja.def, nil
}

// renderJinja renders the checkpoint's template.
func (t *Tokenizer) renderJinja(msgs []Message, opts ChatOptions) (*chatWriter, error) {
	tmpl, err := t.chooseJinja(opts)
	if err != nil {
		return nil, err
	}
	var mark func(string) string
	if opts.ContentSpecialAsText && len(t.jinja.specials) > 0 {
		mark = t.markSpecials
	}
	vars, err := ChatTemplateVars(msgs, opts, t.specialTokenVars(), mark)
	if err != nil {
		return nil, err
	}
	out, err := tmpl.Render(vars, jinja.Options{Now: opts.Now})
	if err != nil {
		return nil, fmt.Errorf("tokenizer: chat template: %w", err)
	}
	w := &chatWriter{}
	if mark == nil {
		w.tmpl(out)
		return w, nil
	}
	for out != "" {
		i := strings.IndexRune(out, markerLead)
		if i < 0 {
			w.tmpl(out)
			break
		}
		w.tmpl(out[:i])
		out = out[i+utf8.RuneLen(markerLead):]
		r, n := utf8.DecodeRuneInString(out)
		if k := int(r) - markerFirst; n > 0 && k >= 0 && k < len(t.jinja.specials) {
			w.content(t.jinja.specials[k])
			out = out[n:]
		} else {
			w.tmpl("\uFFFD") // a marker the template cut in two
		}
	}
	return w, nil
}

// markSpecials replaces the special tokens in s by markers.
func (t *Tokenizer) markSpecials(s string) string {
	s = strings.ReplaceAll(s, string(markerLead), "\uFFFD")
	for k, sp := range t.jinja.specials {
		if k >= maxMarkers {
			break
		}
		if strings.Contains(s, sp) {
			s = strings.ReplaceAll(s, sp, string(markerLead)+string(rune(markerFirst+k)))
		}
	}
	return s
}

// specialTokenVars are the special tokens of tokenizer_config.json that
// transformers passes to the template (its special_tokens_map).
func (t *Tokenizer) specialTokenVars() map[string]string {
	m := map[string]string{}
	for name, v := range map[string]string{"bos_token": t.cfg.bosToken, "eos_token": t.cfg.eosToken,
		"unk_token": t.cfg.unkToken, "pad_token": t.cfg.padToken, "sep_token": t.cfg.sepToken,
		"cls_token": t.cfg.clsToken, "mask_token": t.cfg.maskToken} {
		if v != "" {
			m[name] = v
		}
	}
	return m
}

// ChatTemplateVars builds the variables transformers' apply_chat_template
// renders a template with: messages, tools and documents (None when empty),
// add_generation_prompt, the special tokens, date_string when opts.Date is
// set, then opts.Extra. mark, when not nil, rewrites every string a message
// carries. It is exported for tools that render templates without a
// tokenizer (tools/chatcheck).
func ChatTemplateVars(msgs []Message, opts ChatOptions, specialTokens map[string]string, mark func(string) string) (map[string]jinja.Value, error) {
	if mark == nil {
		mark = func(s string) string { return s }
	}
	list := make([]any, 0, len(msgs))
	for i, m := range msgs {
		d := jinja.NewDict()
		d.Set("role", m.Role)
		if m.NoContent {
			d.Set("content", nil)
		} else {
			d.Set("content", mark(m.Content))
		}
		if m.ReasoningContent != "" {
			d.Set("reasoning_content", mark(m.ReasoningContent))
		}
		if len(m.ToolCalls) > 0 {
			calls := make([]any, 0, len(m.ToolCalls))
			for _, tc := range m.ToolCalls {
				c := jinja.NewDict()
				if tc.ID != "" {
					c.Set("id", tc.ID)
				}
				c.Set("type", "function")
				f := jinja.NewDict()
				f.Set("name", tc.Name)
				var args jinja.Value = mark(string(tc.Arguments))
				if v, err := jinja.FromJSON(tc.Arguments); err == nil {
					switch v.(type) {
					case *jinja.Dict, string:
						args = markValue(v, mark)
					}
				}
				f.Set("arguments", args)
				c.Set("function", f)
				calls = append(calls, c)
			}
			d.Set("tool_calls", calls)
		}
		if m.ToolCallID != "" {
			d.Set("tool_call_id", m.ToolCallID)
		}
		if m.Name != "" {
			d.Set("name", m.Name)
		}
		if m.Role == "" {
			return nil, fmt.Errorf("tokenizer: chat message %d has no role", i)
		}
		list = append(list, d)
	}
	vars := map[string]jinja.Value{
		"messages":              list,
		"add_generation_prompt": opts.AddGenerationPrompt,
		"tools":                 nil,
		"documents":             nil,
	}
	jsonList := func(name string, raws []json.RawMessage) error {
		if len(raws) == 0 {
			return nil
		}
		l := make([]any, len(raws))
		for i, r := range raws {
			v, err := jinja.FromJSON(r)
			if err != nil {
				return fmt.Errorf("tokenizer: chat %s[%d]: %w", name, i, err)
			}
			l[i] = v
		}
		vars[name] = l
		return nil
	}
	if err := jsonList("tools", opts.Tools); err != nil {
		return nil, err
	}
	if err := jsonList("documents", opts.Documents); err != nil {
		return nil, err
	}
	for k, v := range specialTokens {
		vars[k] = v
	}
	if opts.Date != "" {
		vars["date_string"] = opts.Date
	}
	for k, v := range opts.Extra {
		jv, err := jinja.FromGo(v)
		if err != nil {
			return nil, fmt.Errorf("tokenizer: chat template variable %q: %w", k, err)
		}
		vars[k] = jv
	}
	return vars, nil
}

// markValue applies mark to every string of a decoded JSON value.
func markValue(v jinja.Value, mark func(string) string) jinja.Value {
	switch x := v.(type) {
	case string:
		return mark(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = markValue(e, mark)
		}
		return out
	case *jinja.Dict:
		d := jinja.NewDict()
		for _, k := range x.Keys() {
			e, _ := x.Get(k)
			d.Set(k, markValue(e, mark))
		}
		return d
	}
	return v
}

// WithChatTemplate returns a copy of the tokenizer whose chat template is
// tmpl, as vLLM's --chat-template: Jinja source, or the name of a built-in
// format (jinja and plain included; "jinja" goes back to the checkpoint's
// own template). A template that does not compile is an error naming its
// line.
func (t *Tokenizer) WithChatTemplate(tmpl string) (*Tokenizer, error) {
	c := *t
	c.jinja = jinjaTemplates{}
	switch f := ChatFormat(tmpl); f {
	case ChatJinja:
		if t.cfg.chatTemplate == "" {
			return nil, fmt.Errorf("tokenizer: chat template %q: the checkpoint has no chat template", tmpl)
		}
		c.chat = chooseChatTemplate(t.cfg.chatTemplate, t.hasAddedToken)
	case ChatLlama3, ChatChatML, ChatLlama2, ChatMistral, ChatGemma, ChatPlain:
		b := chooseChatTemplate(t.cfg.chatTemplate, t.hasAddedToken)
		if b.builtin != nil {
			b = *b.builtin
		}
		if b.Format != f {
			b = ChatTemplate{Format: f}
		}
		b.Reason = "chosen by the caller"
		c.chat = b
		return &c, nil
	default:
		c.cfg.chatTemplate, c.cfg.chatTemplates = tmpl, nil
		c.chat = chooseChatTemplate(tmpl, t.hasAddedToken)
		c.chat.Reason = "the chat template given by the caller, rendered as Jinja"
	}
	c.initJinja()
	if c.jinja.err != nil {
		return nil, c.jinja.err
	}
	return &c, nil
}

// ChatTemplateSource returns the Jinja source of the checkpoint's template
// that a conversation with (tools true) or without tools renders with, as
// chooseJinja picks it, or "" for a built-in format: what a server reads
// to know how the model writes a tool call.
func (t *Tokenizer) ChatTemplateSource(tools bool) string {
	if t.chat.Format != ChatJinja {
		return ""
	}
	if tools {
		if src, ok := t.cfg.chatTemplates["tool_use"]; ok {
			return src
		}
	}
	if src, ok := t.cfg.chatTemplates["default"]; ok {
		return src
	}
	if t.cfg.chatTemplate == "" && len(t.cfg.chatTemplates) == 1 {
		for _, src := range t.cfg.chatTemplates {
			return src
		}
	}
	return t.cfg.chatTemplate
}
