package jinja

import (
	"os"
	"strings"
	"testing"
	"time"
)

// runawayCases are templates that would run for minutes or forever
// without Limits, each costing its steps differently (statements,
// operations, macro calls, strings and lists built or scanned).
func runawayCases() []struct{ name, src string } {
	big := "{{ " + strings.Repeat("1 + ", 500) + "1 }}"
	attrs := "{% set ns = namespace(a=1) %}{% for i in range(1000000) %}{% for j in range(1000000) %}{% if ns.a and ns.a and ns.a and ns.a and ns.a and ns.a and ns.a and ns.a %}{% endif %}{% endfor %}{% endfor %}"
	return []struct{ name, src string }{
		{"nested loops", "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}"},
		{"empty loops", "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"},
		{"list doubling", "{% set ns = namespace(l=[1]) %}{% for i in range(60) %}{% set ns.l = ns.l + ns.l %}{% endfor %}{{ ns.l | length }}"},
		{"range in a loop", "{% for i in range(200000) %}{% set x = range(1000000) | length %}{% endfor %}"},
		{"sort in a loop", "{% set l = range(50000) | list %}{% for i in range(100000) %}{% set x = l | sort | first %}{% endfor %}"},
		{"scan in a loop", "{% set s = 'x' * 1000000 %}{% for i in range(1000000) %}{% if 'y' in s %}{% endif %}{% endfor %}"},
		{"method scan in a loop", "{% set s = 'x' * 1000000 %}{% for i in range(1000000) %}{% set n = s.count('y') %}{% endfor %}"},
		{"big string in a loop", "{% for i in range(5000) %}{% set x = ('x' * 1000000) | length %}{% endfor %}"},
		{"big expression in a loop", "{% for i in range(1000000) %}{% for j in range(1000000) %}" + big + "{% endfor %}{% endfor %}"},
		{"attributes in a loop", attrs},
		{"macro calls", "{% macro f(a, b, c) %}{{ a }}{% endmacro %}{% for i in range(1000000) %}{% for j in range(1000000) %}{{ f(1, 2, 3) }}{% endfor %}{% endfor %}"},
		{"list slices", "{% set l = range(3000) | list %}{% for i in range(1000000) %}{% set x = l[1:] %}{% endfor %}"},
		{"join ints", "{% set l = range(3000) | list %}{% for i in range(1000000) %}{% set x = l | join(',') %}{% endfor %}"},
	}
}

// TestRunawayTimes renders runawayCases under DefaultLimits and logs the
// time each takes to reach a limit and its nanoseconds a step, the numbers
// DefaultLimits.MaxSteps is set from (about 2 s at most). A measurement,
// not a check: it runs only with JINJA_RUNAWAY set.
func TestRunawayTimes(t *testing.T) {
	if os.Getenv("JINJA_RUNAWAY") == "" {
		t.Skip("JINJA_RUNAWAY is not set")
	}
	for _, c := range runawayCases() {
		tmpl, err := Compile(c.src)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, steps, err := tmpl.render(nil, Options{})
		d := time.Since(start)
		t.Logf("%-26s %8.0f ms %9d steps %6.0f ns/step  %v", c.name, float64(d.Microseconds())/1e3, steps, float64(d.Nanoseconds())/float64(max(steps, 1)), err)
	}
}

// TestRunawaysEnd checks that every runawayCases template ends with a
// limit's error (steps, output or list length).
func TestRunawaysEnd(t *testing.T) {
	lim := Limits{MaxOutput: 1 << 20, MaxSteps: 100_000, MaxDepth: 50}
	for _, c := range runawayCases() {
		tmpl, err := Compile(c.src)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		_, steps, err := tmpl.render(nil, Options{Limits: lim, Now: fixedNow})
		if err == nil || !strings.Contains(err.Error(), "steps") && !strings.Contains(err.Error(), "exceeds") && !strings.Contains(err.Error(), "longer than") {
			t.Errorf("%s: error %v after %d steps, want a limit's", c.name, err, steps)
		}
	}
}
