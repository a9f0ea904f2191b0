package jinja

import (
	"encoding/json"
	"os"
	"testing"
	"time"
)

// FuzzRender compiles and renders hostile templates (a checkpoint's
// tokenizer_config.json, or --chat-template, brings one): any input must end
// in output or an error, within the limits, never a panic. The seeds are the
// constructs transformers' reference rendered (testdata/constructs.json),
// each with its own variables.
func FuzzRender(f *testing.F) {
	b, err := os.ReadFile("testdata/constructs.json")
	if err != nil {
		f.Fatal(err)
	}
	var cs []construct
	if err := json.Unmarshal(b, &cs); err != nil {
		f.Fatal(err)
	}
	for _, c := range cs {
		f.Add(c.Template, string(c.Vars))
	}
	lim := Limits{MaxOutput: 1 << 16, MaxSteps: 20_000, MaxDepth: 20}
	f.Fuzz(func(t *testing.T, src, vars string) {
		tmpl, err := Compile(src)
		if err != nil {
			return
		}
		vs := map[string]Value{}
		if v, err := FromJSON([]byte(vars)); err == nil {
			if d, ok := v.(*Dict); ok {
				for _, k := range d.Keys() {
					vs[k], _ = d.Get(k)
				}
			}
		}
		start := time.Now()
		out, err := tmpl.Render(vs, Options{Limits: lim, Now: fixedNow})
		if err == nil && len(out) > lim.MaxOutput {
			t.Fatalf("%d bytes of output past the %d limit", len(out), lim.MaxOutput)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("rendering took %v within limits of %d steps", d, lim.MaxSteps)
		}
	})
}
