package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"
)

// Chat templates.
//
// Checkpoints ship a Jinja chat template in tokenizer_config.json (or
// chat_template.jinja). It is rendered by the Jinja interpreter of package
// tokenizer/jinja with the settings of transformers' apply_chat_template
// (ChatJinja). Built-in formats, written from the templates the common
// families publish, serve checkpoints without a template and explicit
// overrides (ChatOptions.Format); what they match is documented on each
// ChatFormat.

// Message is one turn of a conversation, with the fields tool-use templates
// read (OpenAI's chat message shape). Fields left zero are not passed to
// the template (they are undefined there), except Content.
type Message struct {
	Role    string // "system", "user", "assistant" or "tool"
	Content string
	// NoContent passes content as None (JSON null) instead of Content, as
	// OpenAI clients send an assistant turn that only calls tools.
	NoContent bool
	// ReasoningContent is the assistant's reasoning (reasoning_content,
	// read by Qwen3 and DeepSeek-R1 templates).
	ReasoningContent string
	// ToolCalls are the calls of an assistant turn (tool_calls).
	ToolCalls []ToolCall
	// ToolCallID is the id of the call a "tool" message answers
	// (tool_call_id).
	ToolCallID string
	// Name is the name of the tool a "tool" message comes from (name).
	Name string
}

// ToolCall is one function call of an assistant message, passed to the
// template as {"id": ID, "type": "function", "function": {"name": Name,
// "arguments": Arguments}} (id omitted when "").
type ToolCall struct {
	ID   string
	Name string
	// Arguments is the JSON of the arguments. A JSON object is passed as a
	// mapping, as transformers expects, a JSON string as that string, and
	// anything else (e.g. text that is not JSON) as its text.
	Arguments json.RawMessage
}

// ChatFormat names a built-in chat template.
type ChatFormat string

// The built-in chat templates.
const (
	// ChatLlama3 renders "<|begin_of_text|>" then per message
	// "<|start_header_id|>ROLE<|end_header_id|>\n\nCONTENT<|eot_id|>" with
	// CONTENT trimmed; the generation prompt opens an assistant header.
	// Llama 3.1-3.3 templates (recognized by "Cutting Knowledge Date") always
	// start with a system message carrying the knowledge cutoff and a date.
	ChatLlama3 ChatFormat = "llama3"
	// ChatChatML renders "<|im_start|>ROLE\nCONTENT<|im_end|>\n" (Qwen and other
	// ChatML models), with the template's default system prompt, if any,
	// when the conversation has none; the generation prompt is
	// "<|im_start|>assistant\n".
	ChatChatML ChatFormat = "chatml"
	// ChatLlama2 renders "<s>[INST] <<SYS>>\nSYSTEM\n<</SYS>>\n\nUSER [/INST] ANSWER </s>"
	// with BOS before every [INST] (Llama 2 chat).
	ChatLlama2 ChatFormat = "llama2"
	// ChatMistral renders "<s>[INST] USER [/INST]ANSWER</s>[INST] ..." (Mistral
	// v0.1 and Mixtral instruct; with a space after </s> when the template
	// writes eos_token + ' ', as some Mistral v0.1 revisions do); a system
	// message is prepended to the first user message, separated by a blank
	// line.
	ChatMistral ChatFormat = "mistral"
	// ChatGemma renders "<bos><start_of_turn>user\nCONTENT<end_of_turn>\n" with the
	// role "model" for the assistant; a system message is prepended to the
	// first user message.
	ChatGemma ChatFormat = "gemma"
	// ChatJinja renders the checkpoint's own Jinja template, exactly as
	// transformers' apply_chat_template does (see package tokenizer/jinja).
	ChatJinja ChatFormat = "jinja"
	// ChatPlain renders "ROLE: CONTENT\n\n" per message and "assistant:" as the
	// generation prompt, for models without a chat format; EncodeChat adds
	// the post-processor's tokens (BOS) as Encode does.
	ChatPlain ChatFormat = "plain"
)

// ChatTemplate is the chat template chosen for a tokenizer, and why.
type ChatTemplate struct {
	Format ChatFormat
	// Reason says what decided: the marker found in tokenizer_config.json's
	// chat_template, the special token found in the vocabulary, or nothing.
	Reason string
	// DefaultSystem is the system prompt used when a conversation has none
	// (ChatML templates such as Qwen's), or "".
	DefaultSystem string
	// KnowledgeDate is true for Llama 3.1+ templates, which open with a
	// system header carrying "Cutting Knowledge Date" and "Today Date".
	KnowledgeDate bool
	// DateFromClock is true when that date is today's date (templates that
	// call strftime_now) rather than the fixed "26 Jul 2024".
	DateFromClock bool

	eosSpace bool // Mistral v0.1: a space follows each assistant EOS

	// builtin is the built-in format the template's markers match, used
	// when ChatOptions.Format asks for it.
	builtin *ChatTemplate
}

// String describes the template, e.g. `llama3 (chat_template has "<|start_header_id|>")`.
func (c ChatTemplate) String() string {
	return fmt.Sprintf("%s (%s)", c.Format, c.Reason)
}

// ChatOptions controls RenderChat and EncodeChat.
type ChatOptions struct {
	// AddGenerationPrompt ends the text with the opening of an assistant
	// turn, as HF's add_generation_prompt.
	AddGenerationPrompt bool
	// ContentSpecialAsText encodes special tokens written inside message
	// contents as plain text, so that a user cannot inject control tokens;
	// the template's own special tokens are still recognized. HF's
	// apply_chat_template does not do this (it is false by default here too).
	ContentSpecialAsText bool
	// Format overrides the chosen template when not "".
	Format ChatFormat
	// Date is the "Today Date" of Llama 3.1+ templates ("26 Jul 2024");
	// "" means the template's default. Jinja templates get it as the
	// variable date_string.
	Date string
	// Tools is the OpenAI "tools" array, one JSON value per tool (the
	// template's tools variable; None when empty). Key order is kept.
	Tools []json.RawMessage
	// Documents are the documents of retrieval-augmented templates
	// (documents; None when empty).
	Documents []json.RawMessage
	// Extra are further template variables (apply_chat_template's extra
	// kwargs, e.g. "enable_thinking": false); they override the special
	// token variables. Values: nil, bool, numbers, strings, []any,
	// map[string]any (keys sorted) or json.RawMessage (order kept).
	Extra map[string]any
	// Template names one of the checkpoint's named templates ("default",
	// "tool_use"); "" picks "tool_use" when Tools is set and the checkpoint
	// has one, else "default", as transformers does.
	Template string
	// Now is the clock of strftime_now in Jinja templates; nil: time.Now.
	Now func() time.Time
}

// ChatTemplate returns the chat template chosen for this tokenizer.
func (t *Tokenizer) ChatTemplate() ChatTemplate { return t.chat }

// chooseChatTemplate recognizes the family of a Jinja template, else of the
// special tokens.
func chooseChatTemplate(tmpl string, hasToken func(string) bool) ChatTemplate {
	markers := []struct {
		marker string
		format ChatFormat
	}{
		{"<|start_header_id|>", ChatLlama3},
		{"<|im_start|>", ChatChatML},
		{"<start_of_turn>", ChatGemma},
		{"<<SYS>>", ChatLlama2},
		{"[INST]", ChatMistral},
	}
	var c ChatTemplate
	if tmpl != "" {
		for _, m := range markers {
			if strings.Contains(tmpl, m.marker) {
				c = ChatTemplate{Format: m.format, Reason: fmt.Sprintf("tokenizer_config.json chat_template has %q", m.marker)}
				break
			}
		}
	}
	if c.Format == "" {
		for _, m := range markers {
			if m.marker != "<<SYS>>" && hasToken(m.marker) {
				c = ChatTemplate{Format: m.format, Reason: fmt.Sprintf("vocabulary has special token %q", m.marker)}
				break
			}
		}
	}
	if c.Format == "" {
		c = ChatTemplate{Format: ChatPlain, Reason: "no chat template or chat special tokens found"}
		if tmpl != "" {
			c.Reason = "chat_template not recognized"
			return ChatTemplate{Format: ChatJinja, Reason: "the checkpoint's chat_template, rendered as Jinja", builtin: &c}
		}
		return c
	}
	switch c.Format {
	case ChatChatML:
		c.DefaultSystem = chatMLDefaultSystem(tmpl)
	case ChatLlama3:
		c.KnowledgeDate = strings.Contains(tmpl, "Cutting Knowledge Date")
		c.DateFromClock = c.KnowledgeDate && strings.Contains(tmpl, "strftime_now")
	case ChatMistral:
		c.eosSpace = strings.Contains(tmpl, "eos_token + ' '")
	}
	if tmpl != "" {
		b := c
		return ChatTemplate{Format: ChatJinja, Reason: "the checkpoint's chat_template, rendered as Jinja", builtin: &b}
	}
	return c
}

// chatMLDefaultSystem extracts the literal default system prompt of a
// ChatML template, such as Qwen2.5's
// '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n'.
func chatMLDefaultSystem(tmpl string) string {
	const open, close = `<|im_start|>system\n`, `<|im_end|>`
	for rest := tmpl; ; {
		i := strings.Index(rest, open)
		if i < 0 {
			return ""
		}
		rest = rest[i+len(open):]
		j := strings.Index(rest, close)
		if j < 0 {
			return ""
		}
		body := rest[:j]
		if body != "" && !strings.ContainsAny(body, "'\"{}+") {
			return strings.NewReplacer(`\n`, "\n", `\t`, "\t").Replace(body)
		}
	}
}

// chatWriter builds the rendered text and remembers where message contents
// are, so that EncodeChat can keep special tokens in them as text.
type chatWriter struct {
	b     strings.Builder
	spans [][2]int
}

func (w *chatWriter) tmpl(s string) { w.b.WriteString(s) }

func (w *chatWriter) content(s string) {
	start := w.b.Len()
	w.b.WriteString(s)
	w.spans = append(w.spans, [2]int{start, w.b.Len()})
}

// pyStrip is Python's str.strip(), which Jinja's trim filter and the
// templates' .strip() call.
func pyStrip(s string) string {
	return strings.TrimFunc(s, func(r rune) bool {
		return unicode.IsSpace(r) || (r >= 0x1C && r <= 0x1F)
	})
}

func (t *Tokenizer) tokenText(id int, fallback string) string {
	if s, ok := t.IDToToken(id); ok && id >= 0 {
		return s
	}
	return fallback
}

// RenderChat renders a conversation with the tokenizer's chat template (or
// opts.Format) and returns the text to encode.
func (t *Tokenizer) RenderChat(msgs []Message, opts ChatOptions) (string, error) {
	w, _, err := t.renderChat(msgs, opts)
	if err != nil {
		return "", err
	}
	return w.b.String(), nil
}

// The post-processor's tokens (BOS) are added by EncodeChat only for
// ChatPlain: a Jinja template writes bos_token itself where the model wants
// it, and transformers' apply_chat_template tokenizes its output with
// add_special_tokens=False.

// EncodeChat renders a conversation and encodes it. Special tokens written
// by the template are recognized; the post-processor's tokens are not added
// (the templates write BOS themselves), except for ChatPlain.
func (t *Tokenizer) EncodeChat(msgs []Message, opts ChatOptions) ([]int, error) {
	w, format, err := t.renderChat(msgs, opts)
	if err != nil {
		return nil, err
	}
	var protect protectFunc
	if opts.ContentSpecialAsText {
		spans := w.spans
		protect = func(start, end int) bool {
			for _, sp := range spans {
				if start < sp[1] && sp[0] < end {
					return true
				}
			}
			return false
		}
	}
	return t.encode(w.b.String(), format == ChatPlain, protect), nil
}

func (t *Tokenizer) renderChat(msgs []Message, opts ChatOptions) (*chatWriter, ChatFormat, error) {
	c := t.chat
	if opts.Format != "" && opts.Format != c.Format {
		if c.builtin != nil && c.builtin.Format == opts.Format {
			c = *c.builtin
		} else {
			c = ChatTemplate{Format: opts.Format}
		}
	}
	for i, m := range msgs {
		if m.Role == "" {
			return nil, "", fmt.Errorf("tokenizer: chat message %d has no role", i)
		}
	}
	if c.Format == ChatJinja {
		w, err := t.renderJinja(msgs, opts)
		return w, ChatJinja, err
	}
	bos := t.tokenText(t.bos, "")
	eos := t.tokenText(t.eos, "")
	w := &chatWriter{}
	switch c.Format {
	case ChatLlama3:
		if c.KnowledgeDate {
			date := opts.Date
			if date == "" {
				date = "26 Jul 2024"
				if c.DateFromClock {
					date = time.Now().Format("02 Jan 2006")
				}
			}
			w.tmpl(bos + "<|start_header_id|>system<|end_header_id|>\n\n")
			w.tmpl("Cutting Knowledge Date: December 2023\nToday Date: " + date + "\n\n")
			if len(msgs) > 0 && msgs[0].Role == "system" {
				w.content(pyStrip(msgs[0].Content))
				msgs = msgs[1:]
			}
			w.tmpl("<|eot_id|>")
		} else if len(msgs) > 0 {
			w.tmpl(bos)
		}
		for _, m := range msgs {
			w.tmpl("<|start_header_id|>" + m.Role + "<|end_header_id|>\n\n")
			w.content(pyStrip(m.Content))
			w.tmpl("<|eot_id|>")
		}
		if opts.AddGenerationPrompt {
			w.tmpl("<|start_header_id|>assistant<|end_header_id|>\n\n")
		}
	case ChatChatML:
		if c.DefaultSystem != "" && (len(msgs) == 0 || msgs[0].Role != "system") {
			w.tmpl("<|im_start|>system\n" + c.DefaultSystem + "<|im_end|>\n")
		}
		for _, m := range msgs {
			w.tmpl("<|im_start|>" + m.Role + "\n")
			w.content(m.Content)
			w.tmpl("<|im_end|>\n")
		}
		if opts.AddGenerationPrompt {
			w.tmpl("<|im_start|>assistant\n")
		}
	case ChatLlama2:
		system, hasSystem := "", false
		if len(msgs) > 0 && msgs[0].Role == "system" {
			system, hasSystem = msgs[0].Content, true
			msgs = msgs[1:]
		}
		for i, m := range msgs {
			switch m.Role {
			case "user":
				w.tmpl(bos + "[INST] ")
				if i == 0 && hasSystem {
					// content.strip() applies to the whole of
					// '<<SYS>>\n' + system + '\n<</SYS>>\n\n' + user.
					w.tmpl("<<SYS>>\n")
					w.content(system)
					w.tmpl("\n<</SYS>>\n\n")
					w.content(strings.TrimRightFunc(m.Content, func(r rune) bool {
						return unicode.IsSpace(r) || (r >= 0x1C && r <= 0x1F)
					}))
				} else {
					w.content(pyStrip(m.Content))
				}
				w.tmpl(" [/INST]")
			case "assistant":
				w.tmpl(" ")
				w.content(pyStrip(m.Content))
				w.tmpl(" " + eos)
			default:
				return nil, "", fmt.Errorf("tokenizer: llama2 chat template has no role %q (want system first, then user and assistant)", m.Role)
			}
		}
	case ChatMistral, ChatGemma:
		msgs = mergeSystem(msgs)
		w.tmpl(bos)
		for _, m := range msgs {
			if c.Format == ChatMistral {
				switch m.Role {
				case "user":
					w.tmpl("[INST] ")
					w.content(m.Content)
					w.tmpl(" [/INST]")
				case "assistant":
					w.content(m.Content)
					w.tmpl(eos)
					if c.eosSpace {
						w.tmpl(" ")
					}
				default:
					return nil, "", fmt.Errorf("tokenizer: mistral chat template has no role %q (want user and assistant)", m.Role)
				}
				continue
			}
			role := m.Role
			if role == "assistant" {
				role = "model"
			}
			w.tmpl("<start_of_turn>" + role + "\n")
			w.content(pyStrip(m.Content))
			w.tmpl("<end_of_turn>\n")
		}
		if opts.AddGenerationPrompt && c.Format == ChatGemma {
			w.tmpl("<start_of_turn>model\n")
		}
	case ChatPlain:
		for _, m := range msgs {
			w.tmpl(m.Role + ": ")
			w.content(m.Content)
			w.tmpl("\n\n")
		}
		if opts.AddGenerationPrompt {
			w.tmpl("assistant:")
		}
	default:
		return nil, "", fmt.Errorf("tokenizer: unknown chat format %q (want jinja, llama3, chatml, llama2, mistral, gemma or plain)", c.Format)
	}
	return w, c.Format, nil
}

// mergeSystem folds a leading system message into the first user message,
// separated by a blank line, for formats without a system role.
func mergeSystem(msgs []Message) []Message {
	if len(msgs) == 0 || msgs[0].Role != "system" {
		return msgs
	}
	out := append([]Message(nil), msgs[1:]...)
	for i := range out {
		if out[i].Role == "user" {
			out[i].Content = msgs[0].Content + "\n\n" + out[i].Content
			return out
		}
	}
	return append([]Message{{Role: "user", Content: msgs[0].Content}}, out...)
}
