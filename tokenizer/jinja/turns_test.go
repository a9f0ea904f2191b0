package jinja_test

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/bitdecode/bitdecode/tokenizer"
	"github.com/bitdecode/bitdecode/tokenizer/jinja"
)

// longChat is a conversation of a system message and turns alternating
// user and assistant, each about turnBytes of text.
func longChat(turns, turnBytes int) []tokenizer.Message {
	words := strings.Fields("the quick brown fox jumps over the lazy dog while a model renders its chat template once per request")
	var b strings.Builder
	for i := 0; b.Len() < turnBytes; i++ {
		b.WriteString(words[i%len(words)])
		b.WriteByte(' ')
	}
	text := b.String()
	msgs := []tokenizer.Message{{Role: "system", Content: "You are a helpful assistant."}}
	for i := range turns {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		msgs = append(msgs, tokenizer.Message{Role: role, Content: text})
	}
	return msgs
}

// TestLongConversations renders every template of the folder
// $JINJA_TEMPLATES (*.jinja; published chat templates are not committed)
// over conversations of 500 and 3,000 turns of 1 KB, and logs the steps
// each counts against Limits.MaxSteps and its time: how far a real
// template is from the default limit. Without the variable it is skipped.
func TestLongConversations(t *testing.T) {
	dir := os.Getenv("JINJA_TEMPLATES")
	if dir == "" {
		t.Skip("JINJA_TEMPLATES names no folder of templates")
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.jinja"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no templates in %s: %v", dir, err)
	}
	sort.Strings(files)
	specials := map[string]string{"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}
	unlimited := jinja.Limits{MaxOutput: 1 << 30, MaxSteps: 1 << 40, MaxDepth: 100}
	for _, turns := range []int{500, 3000} {
		vars, err := tokenizer.ChatTemplateVars(longChat(turns, 1024), tokenizer.ChatOptions{AddGenerationPrompt: true}, specials, nil)
		if err != nil {
			t.Fatal(err)
		}
		over := 0
		for _, f := range files {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			tmpl, err := jinja.Compile(string(src))
			if err != nil {
				t.Errorf("%s: %v", filepath.Base(f), err)
				continue
			}
			start := time.Now()
			out, steps, err := tmpl.RenderSteps(vars, jinja.Options{Limits: unlimited})
			d := time.Since(start)
			mark := ""
			if steps > jinja.DefaultLimits.MaxSteps {
				mark, over = " OVER", over+1
			}
			if err != nil {
				t.Logf("%d turns %-45s %9d steps %8.1f ms%s (error: %v)", turns, filepath.Base(f), steps, float64(d.Microseconds())/1e3, mark, err)
				continue
			}
			t.Logf("%d turns %-45s %9d steps %8.1f ms%s (%d KB out)", turns, filepath.Base(f), steps, float64(d.Microseconds())/1e3, mark, len(out)>>10)
		}
		t.Logf("%d turns: %d of %d templates over the default %d steps", turns, over, len(files), jinja.DefaultLimits.MaxSteps)
	}
}
