package jinja

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

// construct is one entry of testdata/constructs.json: a template exercising
// one part of the language, its variables, and what jinja2 renders, as
// recorded with transformers' own environment (tools/chatcheck/render_hf.py,
// on the device machine; see bench/results/2026-11-26-jinja-17).
type construct struct {
	Name     string          `json:"name"`
	Template string          `json:"template"`
	Vars     json.RawMessage `json:"vars"`
	Want     *string         `json:"want"`
	WantErr  bool            `json:"want_err"`
}

// fixedNow is the clock the reference renderings used for strftime_now.
func fixedNow() time.Time { return time.Date(2026, 11, 26, 12, 34, 56, 0, time.UTC) }

func TestConstructs(t *testing.T) {
	b, err := os.ReadFile("testdata/constructs.json")
	if err != nil {
		t.Fatal(err)
	}
	var cs []construct
	if err := json.Unmarshal(b, &cs); err != nil {
		t.Fatal(err)
	}
	if len(cs) < 50 {
		t.Fatalf("only %d constructs", len(cs))
	}
	for _, c := range cs {
		if c.Want == nil && !c.WantErr {
			t.Errorf("%s: no recorded reference output", c.Name)
			continue
		}
		vars := map[string]Value{}
		v, err := FromJSON(c.Vars)
		if err != nil {
			t.Fatalf("%s: vars: %v", c.Name, err)
		}
		d := v.(*Dict)
		for _, k := range d.Keys() {
			vars[k], _ = d.Get(k)
		}
		tmpl, err := Compile(c.Template)
		var got string
		if err == nil {
			got, err = tmpl.Render(vars, Options{Now: fixedNow})
		}
		switch {
		case c.WantErr && err == nil:
			t.Errorf("%s: rendered %q, want an error", c.Name, got)
		case !c.WantErr && err != nil:
			t.Errorf("%s: %v", c.Name, err)
		case !c.WantErr && got != *c.Want:
			t.Errorf("%s:\n got %q\nwant %q", c.Name, got, *c.Want)
		}
	}
}

func render(t *testing.T, src string, vars map[string]Value, lim Limits) (string, error) {
	t.Helper()
	tmpl, err := Compile(src)
	if err != nil {
		return "", err
	}
	return tmpl.Render(vars, Options{Limits: lim, Now: fixedNow})
}

// TestErrors checks that syntax and runtime errors name the template line.
func TestErrors(t *testing.T) {
	tests := []struct {
		src    string
		line   int
		msg    string
		raised bool
	}{
		{"a\nb\n{% if x %}\nc", 4, "missing {% endif %}", false},
		{"a\n{{ x +* 2 }}", 2, "unexpected", false},
		{"{% for %}", 1, "loop variable", false},
		{"a\n\n{% frobnicate %}", 3, "unknown statement", false},
		{"{{ 'abc }}", 1, "unclosed", false},
		{"x\n{{ missing.attr }}", 2, "'missing' is undefined", false},
		{"\n\n{{ raise_exception('no system role') }}", 3, "template raised: no system role", true},
		{"{{ 1 + 'a' }}", 1, "unsupported operand", false},
		{"{% set l = [1] %}\n{{ l.append(2) }}", 2, "unsafe", false},
		{"{{ x | nofilter }}", 1, "no filter named 'nofilter'", false},
		{"{% break %}", 1, "outside a loop", false},
		{"{{ none | tojson }}{{ undefined_x | tojson }}", 1, "not JSON serializable", false},
	}
	for _, tc := range tests {
		_, err := render(t, tc.src, nil, Limits{})
		var je *Error
		if !errors.As(err, &je) {
			t.Errorf("%q: error %v, want a *jinja.Error", tc.src, err)
			continue
		}
		if je.Line != tc.line || !strings.Contains(je.Msg, tc.msg) || je.Raised != tc.raised {
			t.Errorf("%q: got line %d %q raised=%v, want line %d containing %q raised=%v", tc.src, je.Line, je.Msg, je.Raised, tc.line, tc.msg, tc.raised)
		}
	}
}

// TestHostile checks that templates that would run away end with an error
// within the limits.
func TestHostile(t *testing.T) {
	lim := Limits{MaxOutput: 1 << 20, MaxSteps: 100_000, MaxDepth: 50}
	tests := []struct {
		name, src, msg string
	}{
		{"recursive macro", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "nested more than 50"},
		{"nested loops", "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}", "steps"},
		{"doubling string", "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}", "exceeds"},
		{"repeat", "{{ 'x' * 100000000000 }}", "exceeds"},
		{"huge range", "{{ range(100000000000) | length }}", "range() longer"},
		{"deep parens", "{{ " + strings.Repeat("(", 5000) + "1" + strings.Repeat(")", 5000) + " }}", "nested too deeply"},
		{"deep ifs", strings.Repeat("{% if true %}", 5000) + strings.Repeat("{% endif %}", 5000), "nested too deeply"},
		{"deep not", "{{ " + strings.Repeat("not ", 5000) + "x }}", "nested too deeply"},
		{"deep list", "{{ " + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + " }}", "nested too deeply"},
		{"shared items printed", "{% set ns = namespace(l=[1]) %}{% for i in range(60) %}{% set ns.l = [ns.l, ns.l] %}{% endfor %}{{ ns.l }}", "exceeds"},
		{"shared items as JSON", "{% set ns = namespace(l=[1]) %}{% for i in range(60) %}{% set ns.l = [ns.l, ns.l] %}{% endfor %}{{ ns.l | tojson }}", "exceeds"},
		{"shared items compared", "{% set ns = namespace(l=[1]) %}{% for i in range(60) %}{% set ns.l = [ns.l, ns.l] %}{% endfor %}{{ ns.l == ns.l }}", "comparison"},
		{"list doubling", "{% set ns = namespace(l=[1]) %}{% for i in range(60) %}{% set ns.l = ns.l + ns.l %}{% endfor %}{{ ns.l | length }}", "steps"},
		{"range in a loop", "{% for i in range(200) %}{% set x = range(1000000) | length %}{% endfor %}", "steps"},
		{"sort in a loop", "{% set l = range(50000) | list %}{% for i in range(1000) %}{% set x = l | sort | first %}{% endfor %}", "steps"},
		{"scan in a loop", "{% set s = 'x' * 1000000 %}{% for i in range(100000) %}{% if 'y' in s %}{% endif %}{% endfor %}", "steps"},
		{"method scan in a loop", "{% set s = 'x' * 1000000 %}{% for i in range(100000) %}{% set n = s.count('y') %}{% endfor %}", "steps"},
		{"big string in a loop", "{% for i in range(50) %}{% set x = ('x' * 1000000) | length %}{% endfor %}", "steps"},
		{"join bomb", "{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(20) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ range(1000) | map('string') | map('replace', '', ns.s) | join }}", "exceeds"},
		{"replace bomb", "{% set s = 'x' * 1000000 %}{{ s.replace('x', s) }}", "exceeds"},
	}
	for _, tc := range tests {
		start := time.Now()
		done := make(chan error, 1)
		go func() {
			_, err := render(t, tc.src, nil, lim)
			done <- err
		}()
		select {
		case err := <-done:
			t.Logf("%s: %v in %v", tc.name, err, time.Since(start))
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.msg)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: still running after 20 s", tc.name)
		}
	}
	// Deeply nested JSON input is refused too.
	if _, err := FromJSON([]byte(strings.Repeat("[", 10000) + strings.Repeat("]", 10000))); err == nil {
		t.Errorf("FromJSON accepted 10000 nested arrays")
	}
}

// TestJSONOrder checks that FromJSON keeps key order and number kinds, which
// tojson writes back as Python's json.dumps does.
func TestJSONOrder(t *testing.T) {
	v, err := FromJSON([]byte(`{"z": 1, "a": [1.0, 2, 1e3, "é\u0001"], "m": {"y": null, "b": true}}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := render(t, "{{ v | tojson }}|{{ v.a[0] }}|{{ v.a[2] }}", map[string]Value{"v": v}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"z": 1, "a": [1.0, 2, 1000.0, "é\u0001"], "m": {"y": null, "b": true}}|1.0|1000.0`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// TestFromGo checks the conversion of Go values.
func TestFromGo(t *testing.T) {
	v, err := FromGo(map[string]any{"b": []any{1, "x", nil, true}, "a": 2.5, "raw": json.RawMessage(`{"k2": 1, "k1": 2}`)})
	if err != nil {
		t.Fatal(err)
	}
	got, err := render(t, "{{ v }}", map[string]Value{"v": v}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "{'a': 2.5, 'b': [1, 'x', None, True], 'raw': {'k2': 1, 'k1': 2}}"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if _, err := FromGo(struct{}{}); err == nil {
		t.Errorf("FromGo accepted a struct")
	}
}
