// Command chatcheck compares the chat templates rendered by package
// tokenizer/jinja with the renderings of transformers.
//
// render_hf.py (beside this file) renders, on a machine with transformers,
// every *.jinja template of a folder over the conversations of cases.json,
// and the constructs of tokenizer/jinja/testdata/constructs.json, into a
// JSON file. chatcheck renders the same with bitdecode's interpreter,
// through tokenizer.ChatTemplateVars (the variables EncodeChat passes), and
// reports, per template, the cases that differ (byte for byte) or where one
// side fails and the other does not. Where both fail, the case passes.
//
//	python3 tools/chatcheck/render_hf.py TEMPLATES tools/chatcheck/cases.json tokenizer/jinja/testdata/constructs.json hf.json
//	go run ./tools/chatcheck -templates TEMPLATES -ref hf.json
//
// -update writes the reference's construct outputs into constructs.json as
// the expected values of tokenizer/jinja's tests.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/bitdecode/bitdecode/tokenizer"
	"github.com/bitdecode/bitdecode/tokenizer/jinja"
)

// result is one rendering: its text or its error.
type result struct {
	Out *string `json:"out,omitempty"`
	Err string  `json:"err,omitempty"`
}

type reference struct {
	Versions   map[string]string            `json:"versions"`
	Templates  map[string]map[string]result `json:"templates"`
	Constructs map[string]result            `json:"constructs"`
}

// chatCase is one conversation of cases.json.
type chatCase struct {
	Name                string            `json:"name"`
	Messages            []json.RawMessage `json:"messages"`
	Tools               []json.RawMessage `json:"tools"`
	Documents           []json.RawMessage `json:"documents"`
	AddGenerationPrompt bool              `json:"add_generation_prompt"`
	Kwargs              json.RawMessage   `json:"kwargs"`
}

type construct struct {
	Name     string          `json:"name"`
	Template string          `json:"template"`
	Vars     json.RawMessage `json:"vars"`
	Want     *string         `json:"want,omitempty"`
	WantErr  bool            `json:"want_err,omitempty"`
}

// specialTokens are the special token variables render_hf.py passes.
var specialTokens = map[string]string{"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}

// fixedNow is the clock render_hf.py gives strftime_now.
var fixedNow = func() time.Time { return time.Date(2026, 11, 26, 12, 34, 56, 0, time.UTC) }

func main() {
	templates := flag.String("templates", "", "folder of *.jinja templates")
	cases := flag.String("cases", "tools/chatcheck/cases.json", "conversations")
	constructs := flag.String("constructs", "tokenizer/jinja/testdata/constructs.json", "constructs")
	ref := flag.String("ref", "", "reference renderings (render_hf.py's output)")
	update := flag.Bool("update", false, "write the reference's construct outputs into -constructs")
	verbose := flag.Bool("v", false, "print the first difference of each failing case")
	flag.Parse()
	if err := run(*templates, *cases, *constructs, *ref, *update, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "chatcheck:", err)
		os.Exit(1)
	}
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func run(templates, casesPath, constructsPath, refPath string, update, verbose bool) error {
	var ref reference
	if err := readJSON(refPath, &ref); err != nil {
		return err
	}
	var cases []chatCase
	if err := readJSON(casesPath, &cases); err != nil {
		return err
	}
	var cons []construct
	if err := readJSON(constructsPath, &cons); err != nil {
		return err
	}
	fmt.Printf("reference: %v\n\n", ref.Versions)

	// Constructs.
	failed, compared := 0, 0
	for i, c := range cons {
		want, ok := ref.Constructs[c.Name]
		if !ok {
			continue
		}
		compared++
		got := renderConstruct(c)
		if !same(got, want) {
			failed++
			fmt.Printf("construct %s: differs\n%s", c.Name, diff(got, want))
		}
		if update {
			cons[i].Want, cons[i].WantErr = want.Out, want.Err != ""
		}
	}
	fmt.Printf("constructs: %d of %d in the reference match (%d in %s)\n\n", compared-failed, compared, len(cons), constructsPath)
	if update {
		b, err := json.MarshalIndent(cons, "", " ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(constructsPath, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}

	// Templates.
	names := make([]string, 0, len(ref.Templates))
	for n := range ref.Templates {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Println("| template | cases identical | both error | differ |")
	fmt.Println("| --- | --- | --- | --- |")
	allOK := 0
	var details strings.Builder
	for _, name := range names {
		src, err := os.ReadFile(filepath.Join(templates, name))
		if err != nil {
			return err
		}
		tmpl, cerr := jinja.Compile(string(src))
		ident, bothErr := 0, 0
		var differ []string
		for _, c := range cases {
			want, ok := ref.Templates[name][c.Name]
			if !ok {
				continue
			}
			var got result
			if cerr != nil {
				got.Err = cerr.Error()
			} else {
				got = renderCase(tmpl, c)
			}
			switch {
			case got.Err != "" && want.Err != "" && same(got, want):
				bothErr++
			case same(got, want):
				ident++
			default:
				differ = append(differ, c.Name)
				if verbose {
					fmt.Fprintf(&details, "%s / %s:\n%s\n", name, c.Name, diff(got, want))
				}
			}
		}
		if len(differ) == 0 {
			allOK++
		}
		fmt.Printf("| %s | %d | %d | %s |\n", name, ident, bothErr, strings.Join(differ, ", "))
	}
	fmt.Printf("\n%d of %d templates render every case as the reference does\n", allOK, len(names))
	if details.Len() > 0 {
		fmt.Print("\n", details.String())
	}
	return nil
}

// same reports whether two renderings agree: the same text, or both an
// error (for raise_exception, the same message).
func same(a, b result) bool {
	if a.Err != "" || b.Err != "" {
		if msg, ok := strings.CutPrefix(b.Err, "TemplateError: "); ok && a.Err != "" {
			return strings.Contains(a.Err, "template raised: "+msg)
		}
		return a.Err != "" && b.Err != ""
	}
	return *a.Out == *b.Out
}

// diff shows where two renderings part.
func diff(got, want result) string {
	if got.Err != "" || want.Err != "" {
		g, w := got.Err, want.Err
		if got.Out != nil {
			g = "output " + fmt.Sprintf("%.200q", *got.Out)
		}
		if want.Out != nil {
			w = "output " + fmt.Sprintf("%.200q", *want.Out)
		}
		return fmt.Sprintf("  ours: %s\n  ref:  %s\n", g, w)
	}
	a, b := *got.Out, *want.Out
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	lo := max(i-60, 0)
	return fmt.Sprintf("  at byte %d:\n  ours: %q\n  ref:  %q\n", i, a[lo:min(i+80, len(a))], b[lo:min(i+80, len(b))])
}

func renderConstruct(c construct) result {
	t, err := jinja.Compile(c.Template)
	if err != nil {
		return result{Err: err.Error()}
	}
	vars := map[string]jinja.Value{}
	if len(c.Vars) > 0 {
		v, err := jinja.FromJSON(c.Vars)
		if err != nil {
			return result{Err: err.Error()}
		}
		d := v.(*jinja.Dict)
		for _, k := range d.Keys() {
			vars[k], _ = d.Get(k)
		}
	}
	out, err := t.Render(vars, jinja.Options{Now: fixedNow})
	if err != nil {
		return result{Err: err.Error()}
	}
	return result{Out: &out}
}

// wireMessage is an OpenAI-style message of cases.json.
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

// renderCase renders a conversation the way Tokenizer.RenderChat does.
func renderCase(tmpl *jinja.Template, c chatCase) result {
	msgs := make([]tokenizer.Message, len(c.Messages))
	for i, raw := range c.Messages {
		var w wireMessage
		if err := json.Unmarshal(raw, &w); err != nil {
			return result{Err: err.Error()}
		}
		m := tokenizer.Message{Role: w.Role, ReasoningContent: w.ReasoningContent, ToolCallID: w.ToolCallID, Name: w.Name}
		if w.Content == nil {
			m.NoContent = true
		} else {
			m.Content = *w.Content
		}
		for _, tc := range w.ToolCalls {
			m.ToolCalls = append(m.ToolCalls, tokenizer.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		msgs[i] = m
	}
	opts := tokenizer.ChatOptions{AddGenerationPrompt: c.AddGenerationPrompt, Tools: c.Tools, Documents: c.Documents}
	if len(c.Kwargs) > 0 {
		var kw map[string]json.RawMessage
		if err := json.Unmarshal(c.Kwargs, &kw); err != nil {
			return result{Err: err.Error()}
		}
		opts.Extra = map[string]any{}
		for k, v := range kw {
			opts.Extra[k] = v
		}
	}
	vars, err := tokenizer.ChatTemplateVars(msgs, opts, specialTokens, nil)
	if err != nil {
		return result{Err: err.Error()}
	}
	out, err := tmpl.Render(vars, jinja.Options{Now: fixedNow})
	if err != nil {
		return result{Err: err.Error()}
	}
	return result{Out: &out}
}
