package tokenizer

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bitdecode/bitdecode/tokenizer/jinja"
)

// toolTokens are the special tokens testdata/chat_tools.jinja writes.
var toolTokens = []string{"<|system|>", "<|user|>", "<|assistant|>", "<|end|>"}

// toolsTokenizer is the SentencePiece fixture (BOS <s> added by its
// post-processor) with testdata/chat_tools.jinja as its chat template.
func toolsTokenizer(t *testing.T, config map[string]any) *Tokenizer {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", "chat_tools.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := map[string]any{"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>",
		"add_bos_token": true, "chat_template": string(src)}
	for k, v := range config {
		cfg[k] = v
	}
	return fixtureWith(t, "llama2_spm", toolTokens, cfg)
}

// goldenCase is a conversation of testdata/chat_tools.golden.json (the
// cases of tools/chatcheck/cases.json) with what transformers renders from
// chat_tools.jinja for it.
type goldenCase struct {
	Name                string            `json:"name"`
	Messages            []json.RawMessage `json:"messages"`
	Tools               []json.RawMessage `json:"tools"`
	Documents           []json.RawMessage `json:"documents"`
	AddGenerationPrompt bool              `json:"add_generation_prompt"`
	Kwargs              map[string]any    `json:"kwargs"`
	Want                string            `json:"want"`
}

// wireMessage is an OpenAI-style chat message.
type wireMessage struct {
	Role             string  `json:"role"`
	Content          *string `json:"content"`
	ReasoningContent string  `json:"reasoning_content"`
	ToolCalls        []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
	ToolCallID string `json:"tool_call_id"`
	Name       string `json:"name"`
}

func (w wireMessage) message() Message {
	m := Message{Role: w.Role, ReasoningContent: w.ReasoningContent, ToolCallID: w.ToolCallID, Name: w.Name}
	if w.Content == nil {
		m.NoContent = true
	} else {
		m.Content = *w.Content
	}
	for _, tc := range w.ToolCalls {
		m.ToolCalls = append(m.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	return m
}

// TestRenderChatJinjaTools renders conversations with system prompts, tools,
// tool calls (arguments as an object and as a string), tool results,
// reasoning, unicode and template kwargs through RenderChat, and compares
// with transformers' renderings.
func TestRenderChatJinjaTools(t *testing.T) {
	tok := toolsTokenizer(t, nil)
	if ct := tok.ChatTemplate(); ct.Format != ChatJinja {
		t.Fatalf("chose %v, want jinja", ct)
	}
	b, err := os.ReadFile(filepath.Join("testdata", "chat_tools.golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []goldenCase
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) < 10 {
		t.Fatalf("only %d cases", len(cases))
	}
	for _, c := range cases {
		msgs := make([]Message, len(c.Messages))
		for i, raw := range c.Messages {
			var w wireMessage
			if err := json.Unmarshal(raw, &w); err != nil {
				t.Fatal(err)
			}
			msgs[i] = w.message()
		}
		opts := ChatOptions{AddGenerationPrompt: c.AddGenerationPrompt, Tools: c.Tools, Documents: c.Documents, Extra: c.Kwargs}
		got, err := tok.RenderChat(msgs, opts)
		if err != nil {
			t.Errorf("%s: %v", c.Name, err)
			continue
		}
		if got != c.Want {
			t.Errorf("%s:\n got %q\nwant %q", c.Name, got, c.Want)
		}
	}
}

// TestEncodeChatJinjaBOS checks that a template writing bos_token gets one
// BOS, not a second one from the post-processor (HF tokenizes the rendered
// text with add_special_tokens=False), while the plain fallback keeps it.
func TestEncodeChatJinjaBOS(t *testing.T) {
	tok := toolsTokenizer(t, nil)
	bos, ok := tok.BOS()
	if !ok {
		t.Fatal("fixture has no BOS")
	}
	if enc := tok.Encode("hi", true); len(enc) == 0 || enc[0] != bos {
		t.Fatalf("the fixture's post-processor does not add BOS: %v", enc)
	}
	msgs := []Message{{Role: "user", Content: "hi"}}
	ids, err := tok.EncodeChat(msgs, ChatOptions{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, id := range ids {
		if id == bos {
			n++
		}
	}
	if ids[0] != bos || n != 1 {
		t.Errorf("EncodeChat = %v: want exactly one BOS, first", ids)
	}
	text, _ := tok.RenderChat(msgs, ChatOptions{AddGenerationPrompt: true})
	if want := tok.encode(text, false, nil); !equalInts(ids, want) {
		t.Errorf("EncodeChat = %v, want the rendered text encoded without special tokens %v", ids, want)
	}
	plain, err := tok.EncodeChat(msgs, ChatOptions{AddGenerationPrompt: true, Format: ChatPlain})
	if err != nil {
		t.Fatal(err)
	}
	if plain[0] != bos {
		t.Errorf("plain fallback lost the post-processor's BOS: %v", plain)
	}
}

// TestChatJinjaNamedTemplates checks the choice among named templates and
// chat_template.jinja's precedence.
func TestChatJinjaNamedTemplates(t *testing.T) {
	cfg := map[string]any{"chat_template": []map[string]any{
		{"name": "default", "template": "D{{ messages | length }}"},
		{"name": "tool_use", "template": "T{{ tools | length }}"},
		{"name": "rag", "template": "R{{ documents[0].title }}"},
	}}
	tok := toolsTokenizer(t, cfg)
	msgs := []Message{{Role: "user", Content: "x"}}
	tools := []json.RawMessage{json.RawMessage(`{"type": "function", "function": {"name": "f"}}`)}
	for _, tc := range []struct {
		opts ChatOptions
		want string
	}{
		{ChatOptions{}, "D1"},
		{ChatOptions{Tools: tools}, "T1"},
		{ChatOptions{Template: "rag", Documents: []json.RawMessage{json.RawMessage(`{"title": "doc"}`)}}, "Rdoc"},
		{ChatOptions{Template: "default", Tools: tools}, "D1"},
	} {
		got, err := tok.RenderChat(msgs, tc.opts)
		if err != nil || got != tc.want {
			t.Errorf("%+v: got %q, %v; want %q", tc.opts, got, err, tc.want)
		}
	}
	if _, err := tok.RenderChat(msgs, ChatOptions{Template: "nope"}); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("unknown template name: error %v", err)
	}

	// chat_template.jinja wins over tokenizer_config.json.
	tb, _ := os.ReadFile(filepath.Join("testdata", "llama2_spm.json"))
	cb, _ := os.ReadFile(filepath.Join("testdata", "llama2_spm.config.json"))
	tok2, err := New(Files{Tokenizer: tb, TokenizerConfig: cb, ChatTemplate: []byte("F{{ bos_token }}{{ messages[0].content }}\n")})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := tok2.RenderChat(msgs, ChatOptions{}); err != nil || got != "F<s>x" {
		t.Errorf("chat_template.jinja: got %q, %v; want \"F<s>x\"", got, err)
	}

	// chat_template.json (a multimodal checkpoint's processor template)
	// only where neither of the others has one.
	proc := []byte(`{"chat_template": "P{{ messages[0].content }}"}`)
	var noTemplate map[string]any
	if err := json.Unmarshal(cb, &noTemplate); err != nil {
		t.Fatal(err)
	}
	delete(noTemplate, "chat_template")
	cbNone, _ := json.Marshal(noTemplate)
	for _, tc := range []struct {
		f    Files
		want string
	}{
		{Files{Tokenizer: tb, TokenizerConfig: cbNone, ProcessorChatTemplate: proc}, "Px"},
		{Files{Tokenizer: tb, TokenizerConfig: cbNone, ChatTemplate: []byte("F{{ messages[0].content }}"), ProcessorChatTemplate: proc}, "Fx"},
		{Files{Tokenizer: tb, TokenizerConfig: cb, ProcessorChatTemplate: proc}, ""}, // tokenizer_config.json's
	} {
		tok3, err := New(tc.f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tok3.RenderChat(msgs, ChatOptions{})
		if err != nil || (tc.want != "" && got != tc.want) || (tc.want == "" && strings.HasPrefix(got, "P")) {
			t.Errorf("processor template case %q: got %q, %v", tc.want, got, err)
		}
	}
	if _, err := New(Files{Tokenizer: tb, TokenizerConfig: cbNone, ProcessorChatTemplate: []byte(`{"chat_template": 3}`)}); err == nil || !strings.Contains(err.Error(), "chat_template.json") {
		t.Errorf("a malformed chat_template.json: err = %v", err)
	}
}

// TestChatJinjaErrors checks that templates that do not compile or fail
// give errors naming the line, instead of a silent fallback.
func TestChatJinjaErrors(t *testing.T) {
	msgs := []Message{{Role: "user", Content: "x"}}
	bad := toolsTokenizer(t, map[string]any{"chat_template": "ok\n{% for m in messages %}\n{{ m.content }"})
	_, err := bad.RenderChat(msgs, ChatOptions{})
	var je *jinja.Error
	if !errors.As(err, &je) || je.Line != 3 || !strings.Contains(err.Error(), "chat template") {
		t.Errorf("syntax error: %v, want a jinja.Error on line 3", err)
	}
	raise := toolsTokenizer(t, map[string]any{"chat_template": "{% for m in messages %}\n{% if m.role == 'user' %}{{ raise_exception('Only system and assistant') }}{% endif %}{% endfor %}"})
	_, err = raise.RenderChat(msgs, ChatOptions{})
	if !errors.As(err, &je) || je.Line != 2 || !je.Raised || !strings.Contains(err.Error(), "Only system and assistant") {
		t.Errorf("raise_exception: %v", err)
	}
	// The built-in formats stay available as an explicit override.
	if got, err := bad.RenderChat(msgs, ChatOptions{Format: ChatPlain}); err != nil || got != "user: x\n\n" {
		t.Errorf("plain override: %q, %v", got, err)
	}
	// A hostile template ends with an error.
	loop := toolsTokenizer(t, map[string]any{"chat_template": "{% for i in range(1000000) %}{% for j in range(1000000) %}{% endfor %}{% endfor %}"})
	if _, err := loop.RenderChat(msgs, ChatOptions{}); err == nil || !strings.Contains(err.Error(), "steps") {
		t.Errorf("runaway loops: %v", err)
	}
}

// TestChatJinjaDateAndClock checks date_string (ChatOptions.Date) and
// strftime_now (ChatOptions.Now).
func TestChatJinjaDateAndClock(t *testing.T) {
	tok := toolsTokenizer(t, map[string]any{"chat_template": "{{ date_string | default('none') }}|{{ strftime_now('%d %b %Y') }}"})
	now := func() time.Time { return time.Date(2025, 3, 7, 0, 0, 0, 0, time.UTC) }
	got, err := tok.RenderChat(nil, ChatOptions{Date: "26 Jul 2024", Now: now})
	if err != nil || got != "26 Jul 2024|07 Mar 2025" {
		t.Errorf("got %q, %v", got, err)
	}
	// The special tokens of tokenizer_config.json, as transformers'
	// special_tokens_map; Extra overrides them.
	tok = toolsTokenizer(t, map[string]any{"sep_token": map[string]any{"content": "<sep>"}, "mask_token": "<mask>",
		"chat_template": "{{ bos_token }}{{ eos_token }}{{ unk_token }}{{ pad_token }}{{ sep_token }}{{ cls_token is defined }}{{ mask_token }}"})
	got, err = tok.RenderChat(nil, ChatOptions{Extra: map[string]any{"pad_token": "P"}})
	if err != nil || got != "<s></s><unk>P<sep>False<mask>" {
		t.Errorf("special tokens: got %q, %v", got, err)
	}
}

// TestChatGocoder checks the gocoder-23m checkpoint's tokenizer (no chat
// template): the plain fallback, with the post-processor's BOS as before.
func TestChatGocoder(t *testing.T) {
	dir := "/work/shared/models/gocoder-23m"
	if _, err := os.Stat(filepath.Join(dir, TokenizerConfigFile)); err != nil {
		t.Skipf("gocoder-23m not present (%v)", err)
	}
	tok, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if ct := tok.ChatTemplate(); ct.Format != ChatPlain {
		t.Fatalf("gocoder-23m chose %v, want plain", ct)
	}
	msgs := []Message{{Role: "user", Content: "func main() {"}}
	text, err := tok.RenderChat(msgs, ChatOptions{AddGenerationPrompt: true})
	if err != nil || text != "user: func main() {\n\nassistant:" {
		t.Fatalf("RenderChat = %q, %v", text, err)
	}
	ids, err := tok.EncodeChat(msgs, ChatOptions{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := tok.Encode(text, true); !equalInts(ids, want) {
		t.Errorf("EncodeChat = %v, want Encode(text) = %v", ids, want)
	}
}

// longConversation is n user/assistant turns after a system prompt.
func longConversation(n int) []Message {
	msgs := []Message{{Role: "system", Content: "You are terse."}}
	for i := 0; i < n; i++ {
		msgs = append(msgs, Message{Role: "user", Content: "question"}, Message{Role: "assistant", Content: "<think>\nhm\n</think>\n\nanswer"})
	}
	return append(msgs, Message{Role: "user", Content: "last"})
}

// TestChatJinjaLongConversation checks that a conversation of 10,000 turns
// stays within the interpreter's default limits.
func TestChatJinjaLongConversation(t *testing.T) {
	tok := toolsTokenizer(t, nil)
	msgs := longConversation(10_000)
	got, err := tok.RenderChat(msgs, ChatOptions{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(got, "<|assistant|>answer<|end|>"); n != 10_000 {
		t.Errorf("%d answers rendered, want 10000", n)
	}
}

// BenchmarkRenderChatJinja renders a 20-turn conversation with tools.
func BenchmarkRenderChatJinja(b *testing.B) {
	t := &testing.T{}
	tok := toolsTokenizer(t, nil)
	msgs := longConversation(10)
	tools := []json.RawMessage{json.RawMessage(`{"type": "function", "function": {"name": "get_weather", "description": "Weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}`)}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := tok.RenderChat(msgs, ChatOptions{AddGenerationPrompt: true, Tools: tools}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestWithChatTemplate checks overriding the checkpoint's template with
// Jinja source or a built-in format, and back.
func TestWithChatTemplate(t *testing.T) {
	tok := toolsTokenizer(t, nil)
	msgs := []Message{{Role: "user", Content: "hi"}}
	own, _ := tok.RenderChat(msgs, ChatOptions{AddGenerationPrompt: true})
	for _, tc := range []struct {
		tmpl, want string
		format     ChatFormat
	}{
		{"[{{ messages[0].content }}]{% if add_generation_prompt %}>{% endif %}", "[hi]>", ChatJinja},
		{"plain", "user: hi\n\nassistant:", ChatPlain},
		{"chatml", "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", ChatChatML},
		{"jinja", own, ChatJinja},
	} {
		t2, err := tok.WithChatTemplate(tc.tmpl)
		if err != nil {
			t.Errorf("%q: %v", tc.tmpl, err)
			continue
		}
		got, err := t2.RenderChat(msgs, ChatOptions{AddGenerationPrompt: true})
		if err != nil || got != tc.want || t2.ChatTemplate().Format != tc.format {
			t.Errorf("%q: %q (%v), %v; want %q (%s)", tc.tmpl, got, t2.ChatTemplate(), err, tc.want, tc.format)
		}
	}
	if got, _ := tok.RenderChat(msgs, ChatOptions{AddGenerationPrompt: true}); got != own {
		t.Errorf("WithChatTemplate changed the original tokenizer: %q", got)
	}
	if _, err := tok.WithChatTemplate("a\n{% if %}"); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("bad template: %v, want an error on line 2", err)
	}
}
