package tokenizer_test

import (
	"fmt"
	"os"

	"github.com/bitdecode/bitdecode/tokenizer"
)

func Example() {
	// Load reads tokenizer.json, and tokenizer_config.json and
	// generation_config.json when they are beside it.
	tok, err := tokenizer.Load("testdata/llama3_split.json")
	if err != nil {
		fmt.Println(err)
		return
	}
	ids := tok.Encode("Hello world", true)
	fmt.Println(ids)
	fmt.Printf("%q\n", tok.Decode(ids))
	fmt.Printf("%q\n", tok.DecodeWith(ids, tokenizer.DecodeOptions{SkipSpecial: true}))
	// Output:
	// [491 72 101 262 276]
	// "<|begin_of_text|>Hello world"
	// "Hello world"
}

func ExampleTokenizer_EncodeWith() {
	tok, _ := tokenizer.Load("testdata/llama3_split.json")
	text := "<|eot_id|>"
	fmt.Println(tok.Encode(text, false))
	// A user typing a control token gets plain text.
	fmt.Println(tok.EncodeWith(text, tokenizer.EncodeOptions{SpecialAsText: true}))
	// Output:
	// [498]
	// [60 124 101 111 116 95 105 100 124 62]
}

func ExampleDecodeStream() {
	tok, _ := tokenizer.Load("testdata/llama2_spm.json")
	// "€" is not in this vocabulary: it is encoded as three byte tokens.
	ids := tok.Encode("a€!", false)
	s := tok.NewDecodeStream(tokenizer.DecodeOptions{})
	for _, id := range ids {
		tokText, _ := tok.IDToToken(id)
		fmt.Printf("%-7s -> %q\n", tokText, s.Step(id))
	}
	fmt.Printf("flush   -> %q\n", s.Flush())
	// Output:
	// ▁       -> ""
	// a       -> "a"
	// <0xE2>  -> ""
	// <0x82>  -> ""
	// <0xAC>  -> "€"
	// <0x21>  -> "!"
	// flush   -> ""
}

func ExampleTokenizer_EncodeChat() {
	tb, _ := os.ReadFile("testdata/llama3_split.json")
	cb, _ := os.ReadFile("testdata/llama3_split.config.json")
	tok, err := tokenizer.New(tokenizer.Files{Tokenizer: tb, TokenizerConfig: cb})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(tok.ChatTemplate())
	msgs := []tokenizer.Message{{Role: "user", Content: "Hi"}}
	opts := tokenizer.ChatOptions{AddGenerationPrompt: true, ContentSpecialAsText: true}
	text, _ := tok.RenderChat(msgs, opts)
	fmt.Printf("%q\n", text)
	ids, _ := tok.EncodeChat(msgs, opts)
	fmt.Println(len(ids), "tokens; stop ids", tok.StopIDs())
	// Output:
	// jinja (the checkpoint's chat_template, rendered as Jinja)
	// "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
	// 23 tokens; stop ids [492 498]
}
