package main

import (
	"fmt"

	"github.com/bitdecode/bitdecode/engine"
	"github.com/bitdecode/bitdecode/internal/fileio"
	"github.com/bitdecode/bitdecode/tokenizer"
)

// chatTemplateHelp documents --chat-template (run, chat, serve).
const chatTemplateHelp = "override the model's chat template: a Jinja file (as vLLM's --chat-template), or a built-in format: llama3, chatml, llama2, mistral, gemma, plain"

// maxChatTemplateBytes bounds the template file --chat-template reads.
const maxChatTemplateBytes = 1 << 20

// useChatTemplate applies --chat-template to an opened model: a built-in
// format's name, else the path of a Jinja file. A template that does not
// compile is an error naming its line.
func useChatTemplate(lm *engine.Model, v string) error {
	if v == "" {
		return nil
	}
	src := v
	switch tokenizer.ChatFormat(v) {
	case tokenizer.ChatLlama3, tokenizer.ChatChatML, tokenizer.ChatLlama2, tokenizer.ChatMistral, tokenizer.ChatGemma, tokenizer.ChatPlain:
	default:
		b, err := fileio.ReadFile(v, maxChatTemplateBytes)
		if err != nil {
			return usageErrorf("--chat-template %s: %v (want a Jinja file or llama3, chatml, llama2, mistral, gemma, plain)", v, err)
		}
		src = string(b)
	}
	tok, err := lm.Tokenizer.WithChatTemplate(src)
	if err != nil {
		return fmt.Errorf("--chat-template %s: %w", v, err)
	}
	lm.Tokenizer = tok
	return nil
}
