package jinja

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode"
)

// Error is a template error: a syntax error found by Compile or a failure
// while rendering, with the template line it happened on.
type Error struct {
	Line int    // 1-based line of the template, 0 when unknown
	Msg  string // what went wrong
	// Raised is true when the template itself called raise_exception.
	Raised bool
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	}
	return e.Msg
}

// Limits bound the work of one Render, so that a hostile template ends with
// an error instead of exhausting memory or time.
type Limits struct {
	MaxOutput int // bytes of output (and of any string built)
	MaxSteps  int // statements, loop iterations and operations executed, plus the work of operations on large values (charge)
	MaxDepth  int // nested macro calls
}

// DefaultLimits end a runaway template within about 2 s on a 2-core EPYC
// (a step costs 30-90 ns whatever its kind, runaway_test.go), and are
// above what published chat templates need: at most 0.6M steps for 500
// turns of 1 KB, and for 3,000 turns 18.4M (Gemma 4's, which scans back
// over the earlier messages at each one), 11.4M (DeepSeek-V4's, the same),
// under 5M for the 43 others (session 19, turns_test.go).
var DefaultLimits = Limits{MaxOutput: 64 << 20, MaxSteps: 25_000_000, MaxDepth: 100}

// Template is a compiled template; it is safe for concurrent use.
type Template struct {
	body []node
}

// Compile parses a template with the settings Hugging Face's
// apply_chat_template uses (trim_blocks, lstrip_blocks, loop controls).
func Compile(src string) (*Template, error) {
	segs, err := lexSegments(src)
	if err != nil {
		return nil, err
	}
	body, err := parseTemplate(segs)
	if err != nil {
		return nil, err
	}
	return &Template{body: body}, nil
}

// Options controls Render.
type Options struct {
	Limits Limits
	// Now is the clock of strftime_now; nil means time.Now.
	Now func() time.Time
}

// Render renders the template with the given variables (template values,
// see FromGo and FromJSON).
func (t *Template) Render(vars map[string]Value, opts Options) (string, error) {
	out, _, err := t.render(vars, opts)
	return out, err
}

// render is Render, also returning the steps counted against
// Limits.MaxSteps.
func (t *Template) render(vars map[string]Value, opts Options) (string, int, error) {
	if opts.Limits == (Limits{}) {
		opts.Limits = DefaultLimits
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	r := &renderer{lim: opts.Limits, now: opts.Now}
	root := &scope{vars: map[string]Value{}}
	for k, v := range vars {
		root.vars[k] = v
	}
	r.root = root
	var b strings.Builder
	err := r.execGuarded(t.body, root, &b)
	if err != nil {
		var ctl *loopControl
		if errors.As(err, &ctl) {
			return "", r.steps, &Error{Line: ctl.line, Msg: "break or continue outside a loop"}
		}
		return "", r.steps, err
	}
	return b.String(), r.steps, nil
}

// execGuarded runs the template, turning a limitError panic into an error.
func (r *renderer) execGuarded(body []node, sc *scope, b *strings.Builder) (err error) {
	defer func() {
		if p := recover(); p != nil {
			le, ok := p.(*limitError)
			if !ok {
				panic(p)
			}
			err = &Error{Msg: le.msg}
		}
	}()
	return r.exec(body, sc, b)
}

type scope struct {
	vars   map[string]Value
	parent *scope
}

func (s *scope) lookup(name string) (Value, bool) {
	for c := s; c != nil; c = c.parent {
		if v, ok := c.vars[name]; ok {
			return v, true
		}
	}
	return nil, false
}

type renderer struct {
	lim   Limits
	now   func() time.Time
	steps int
	line  int // the line of the statement running
	work  int // bytes of charge's work not yet counted as a step
	depth int
	root  *scope
}

// loopControl carries break and continue out of the loop body.
type loopControl struct {
	brk  bool
	line int
}

func (l *loopControl) Error() string { return "loop control" }

func errorf(line int, format string, args ...any) error {
	return &Error{Line: line, Msg: fmt.Sprintf(format, args...)}
}

// unpack binds v to names in sc, as Python assigns: one name takes v
// whole, several take its items (as many as names; what names them in
// the error: "names" of a set, "loop variables" of a for).
func (r *renderer) unpack(sc *scope, names []string, v Value, line int, what string) error {
	if len(names) == 1 {
		sc.vars[names[0]] = v
		return nil
	}
	items, err := r.iterate(v, line)
	if err != nil {
		return err
	}
	if len(items) != len(names) {
		return errorf(line, "cannot unpack %d values into %d %s", len(items), len(names), what)
	}
	for i, name := range names {
		sc.vars[name] = items[i]
	}
	return nil
}

func (r *renderer) step(line int) error {
	r.steps++
	r.line = line
	if r.steps > r.lim.MaxSteps {
		return errorf(line, "template took more than %d steps", r.lim.MaxSteps)
	}
	return nil
}

// addSteps counts n steps of work beside statements (an operation, a
// macro call's setup, a conversion).
func (r *renderer) addSteps(line, n int) error {
	if r.steps += n; r.steps > r.lim.MaxSteps {
		return errorf(line, "template took more than %d steps", r.lim.MaxSteps)
	}
	return nil
}

// The work of an operation (charge) in steps of Limits.MaxSteps: a string's
// bytes and a list's items, an item weighing itemBytes bytes, stepBytes of
// them a step, what an operation builds counting three times what it
// reads (fresh memory is allocated and written). Scanning 256 bytes or 4
// items costs at most what a statement does; building them (a string, a
// slice, range()'s boxed integers) about three times that; a join
// converting items to text a step an item (builtins.go). So a runaway
// template ends within about 2 s (DefaultLimits), while templates that
// slice or filter the conversation once a message (quadratic in its
// length, but cheap) render thousands of turns.
const (
	itemBytes = 64
	stepBytes = 256
)

// macroSteps is what a macro call counts beside its statements: its scope,
// arguments and output cost about what that many steps do.
const macroSteps = 16

// charge counts, against Limits.MaxSteps, the work of an operation in
// proportion to the values it reads or builds (strings, lists, tuples,
// dicts). Steps alone count statements and loop iterations, so without
// this a loop of a few thousand iterations building range(1 << 20) or
// scanning a 60 MB string each time would run for minutes within the
// limits.
func (r *renderer) charge(line int, vs ...Value) error {
	for _, v := range vs {
		switch v := v.(type) {
		case string:
			r.work += len(v)
		case []any:
			r.work += itemBytes * len(v)
		case Tuple:
			r.work += itemBytes * len(v)
		case *Dict:
			r.work += itemBytes * len(v.keys)
		}
	}
	if r.work < stepBytes {
		return nil
	}
	r.steps += r.work / stepBytes
	r.work %= stepBytes
	if r.steps > r.lim.MaxSteps {
		return errorf(line, "template took more than %d steps (each %d bytes of a string or %d list items an operation reads or builds count as a step)", r.lim.MaxSteps, stepBytes, stepBytes/itemBytes)
	}
	return nil
}

// charged runs op, charging (charge) the values it reads, in, before and
// the value it builds and returns after, three times.
func (r *renderer) charged(line int, in []Value, op func() (Value, error)) (Value, error) {
	if err := r.charge(line, in...); err != nil {
		return nil, err
	}
	out, err := op()
	if err == nil {
		// Built, not only read: allocating and writing fresh memory
		// costs about three times a scan of it.
		err = r.charge(line, out, out, out)
	}
	return out, err
}

// cheapFilters read no more of their input than its header: they are not
// charged for it (charge), only for what they return.
var cheapFilters = map[string]bool{"length": true, "count": true, "first": true, "last": true, "default": true, "d": true}

func (r *renderer) write(b *strings.Builder, s string, line int) error {
	if b.Len()+len(s) > r.lim.MaxOutput {
		return errorf(line, "template output exceeds %d bytes", r.lim.MaxOutput)
	}
	b.WriteString(s)
	return nil
}

func (r *renderer) exec(body []node, sc *scope, b *strings.Builder) error {
	for _, n := range body {
		if err := r.execNode(n, sc, b); err != nil {
			return err
		}
	}
	return nil
}

func (r *renderer) execNode(n node, sc *scope, b *strings.Builder) error {
	switch n := n.(type) {
	case *textNode:
		return r.write(b, n.s, 0)
	case *outputNode:
		if err := r.step(n.line); err != nil {
			return err
		}
		v, err := r.eval(n.e, sc)
		if err != nil {
			return err
		}
		return r.write(b, toStrN(v, r.lim.MaxOutput+1), n.line)
	case *ifNode:
		if err := r.step(n.line); err != nil {
			return err
		}
		for i, c := range n.conds {
			v, err := r.eval(c, sc)
			if err != nil {
				return err
			}
			if truthy(v) {
				return r.exec(n.bodies[i], sc, b)
			}
		}
		return r.exec(n.els, sc, b)
	case *forNode:
		return r.execFor(n, sc, b)
	case *setNode:
		if err := r.step(n.line); err != nil {
			return err
		}
		var v Value
		if n.e != nil {
			var err error
			if v, err = r.eval(n.e, sc); err != nil {
				return err
			}
		} else {
			var sb strings.Builder
			if err := r.exec(n.body, sc, &sb); err != nil {
				return err
			}
			v = sb.String()
		}
		if n.ns != "" {
			nsv, _ := sc.lookup(n.ns)
			ns, ok := nsv.(*namespace)
			if !ok {
				return errorf(n.line, "cannot assign attribute on non-namespace object %s", n.ns)
			}
			ns.d.Set(n.attr, v)
			return nil
		}
		return r.unpack(sc, n.names, v, n.line, "names")
	case *macroNode:
		sc.vars[n.name] = &macro{node: n, r: r}
		return nil
	case *callBlockNode:
		if err := r.step(n.line); err != nil {
			return err
		}
		caller := &builtinFunc{name: "caller", fn: func(r *renderer, args []Value, kw *Dict, line int) (Value, error) {
			var sb strings.Builder
			err := r.exec(n.body, &scope{vars: map[string]Value{}, parent: sc}, &sb)
			return sb.String(), err
		}}
		fn, err := r.eval(n.call.fn, sc)
		if err != nil {
			return err
		}
		args, kw, err := r.evalArgs(n.call.args, n.call.kwargs, sc)
		if err != nil {
			return err
		}
		if kw == nil {
			kw = NewDict()
		}
		kw.Set("caller", caller)
		v, err := r.call(fn, args, kw, n.line)
		if err != nil {
			return err
		}
		return r.write(b, toStr(v), n.line)
	case *filterBlockNode:
		var sb strings.Builder
		if err := r.exec(n.body, sc, &sb); err != nil {
			return err
		}
		args, kw, err := r.evalArgs(n.filter.args, n.filter.kwargs, sc)
		if err != nil {
			return err
		}
		v, err := r.applyFilter(n.filter.name, sb.String(), args, kw, n.line)
		if err != nil {
			return err
		}
		return r.write(b, toStr(v), n.line)
	case *loopCtlNode:
		return &loopControl{brk: n.brk, line: n.line}
	}
	return fmt.Errorf("jinja: unknown node %T", n)
}

// loopObj is the "loop" variable of a for loop: over items, or over the
// range start, start+step, ... of n integers when items is nil.
type loopObj struct {
	items       []Value
	start, step int64
	n           int
	i           int
}

// item returns the loop's item i.
func (l *loopObj) item(i int) Value {
	if l.items != nil {
		return l.items[i]
	}
	return boxInt(l.start + int64(i)*l.step)
}

func (l *loopObj) attr(name string) (Value, bool) {
	n := int64(l.n)
	i := int64(l.i)
	switch name {
	case "index":
		return boxInt(i + 1), true
	case "index0":
		return boxInt(i), true
	case "revindex":
		return boxInt(n - i), true
	case "revindex0":
		return boxInt(n - i - 1), true
	case "first":
		return i == 0, true
	case "last":
		return i == n-1, true
	case "length":
		return n, true
	case "depth":
		return int64(1), true
	case "depth0":
		return int64(0), true
	case "previtem":
		if i > 0 {
			return l.item(l.i - 1), true
		}
		return Undefined{hint: "there is no previous item"}, true
	case "nextitem":
		if i < n-1 {
			return l.item(l.i + 1), true
		}
		return Undefined{hint: "there is no next item"}, true
	case "cycle":
		return &builtinFunc{name: "loop.cycle", fn: func(r *renderer, args []Value, kw *Dict, line int) (Value, error) {
			if len(args) == 0 {
				return nil, errorf(line, "no items for cycling given")
			}
			return args[l.i%len(args)], nil
		}}, true
	}
	return nil, false
}

func (r *renderer) execFor(n *forNode, sc *scope, b *strings.Builder) error {
	if err := r.step(n.line); err != nil {
		return err
	}
	loop := &loopObj{}
	args, line, isRange, err := r.lazyRange(n, sc)
	switch {
	case err != nil:
		return err
	case isRange:
		// A loop over range() visits its integers without building their
		// list: the iterations are counted, and a list of them would only
		// be charged for again.
		if loop.start, loop.step, loop.n, err = rangeArgs(args, line); err != nil {
			return err
		}
	default:
		it, err := r.eval(n.iter, sc)
		if err != nil {
			return err
		}
		if loop.items, err = r.iterate(it, n.line); err != nil {
			return err
		}
		if loop.items == nil {
			loop.items = []Value{}
		}
		loop.n = len(loop.items)
	}
	bind := func(s *scope, item Value) error { return r.unpack(s, n.targets, item, n.line, "loop variables") }
	if n.cond != nil {
		kept := []Value{}
		for i := range loop.n {
			item := loop.item(i)
			if err := r.step(n.line); err != nil {
				return err
			}
			s := &scope{vars: map[string]Value{}, parent: sc}
			if err := bind(s, item); err != nil {
				return err
			}
			v, err := r.eval(n.cond, s)
			if err != nil {
				return err
			}
			if truthy(v) {
				kept = append(kept, item)
			}
		}
		loop = &loopObj{items: kept, n: len(kept)}
	}
	if loop.n == 0 {
		return r.exec(n.els, sc, b)
	}
	// One scope for the loop, emptied at each iteration: nothing keeps a
	// loop body's scope after it (macros run in the root's), and a map a
	// iteration costs more than the rest of a small body.
	s := &scope{vars: map[string]Value{}, parent: sc}
	for i := range loop.n {
		item := loop.item(i)
		if err := r.step(n.line); err != nil {
			return err
		}
		loop.i = i
		if len(s.vars) > 1+len(n.targets) { // the body set more than the loop's names
			clear(s.vars)
		}
		s.vars["loop"] = loop
		if err := bind(s, item); err != nil {
			return err
		}
		if err := r.exec(n.body, s, b); err != nil {
			var ctl *loopControl
			if errors.As(err, &ctl) {
				if ctl.brk {
					break
				}
				continue
			}
			return err
		}
	}
	return nil
}

// lazyRange reports whether for loop n iterates over a call of the
// builtin range() (not a variable of that name, not with keywords), and
// returns its evaluated arguments; the call counts as the step eval would
// count.
func (r *renderer) lazyRange(n *forNode, sc *scope) ([]Value, int, bool, error) {
	c, ok := n.iter.(*callExpr)
	if !ok || len(c.kwargs) > 0 {
		return nil, 0, false, nil
	}
	if name, ok := c.fn.(*nameExpr); !ok || name.name != "range" {
		return nil, 0, false, nil
	}
	if _, shadowed := sc.lookup("range"); shadowed {
		return nil, 0, false, nil
	}
	if err := r.addSteps(c.line, 1); err != nil {
		return nil, 0, false, err
	}
	args, _, err := r.evalArgs(c.args, nil, sc)
	return args, c.line, true, err
}

// iterate returns the items a for loop visits.
func (r *renderer) iterate(v Value, line int) ([]Value, error) {
	switch v := v.(type) {
	case []any:
		return v, nil
	case Tuple:
		return v, nil
	case *Dict:
		return append([]Value{}, v.keys...), nil
	case string:
		out := make([]Value, 0, len(v))
		for _, c := range v {
			out = append(out, string(c))
		}
		return out, nil
	case Undefined:
		return nil, nil
	}
	return nil, errorf(line, "'%s' object is not iterable", typeName(v))
}

// macro is a {% macro %} bound to the renderer that defined it.
type macro struct {
	node *macroNode
	r    *renderer
}

// builtinFunc is a global function, filter helper or bound method.
type builtinFunc struct {
	name string
	fn   func(r *renderer, args []Value, kw *Dict, line int) (Value, error)
}

func (r *renderer) call(fn Value, args []Value, kw *Dict, line int) (Value, error) {
	switch f := fn.(type) {
	case *builtinFunc:
		return f.fn(r, args, kw, line)
	case *macro:
		// A call's scope, arguments and output cost what macroSteps
		// statements do.
		if err := r.addSteps(line, macroSteps); err != nil {
			return nil, err
		}
		r.depth++
		defer func() { r.depth-- }()
		if r.depth > r.lim.MaxDepth {
			return nil, errorf(line, "macro calls nested more than %d deep", r.lim.MaxDepth)
		}
		m := f.node
		s := &scope{vars: map[string]Value{}, parent: r.root}
		var extra []any
		for i, a := range args {
			if i < len(m.params) {
				s.vars[m.params[i]] = a
			} else {
				extra = append(extra, a)
			}
		}
		if extra == nil {
			extra = []any{}
		}
		s.vars["varargs"] = Tuple(extra)
		kwargs := NewDict()
		if kw != nil {
			for i, kv := range kw.keys {
				v := kw.value(i)
				k := toStr(kv)
				if k == "caller" {
					s.vars["caller"] = v
					continue
				}
				known := false
				for _, p := range m.params {
					if p == k {
						known = true
					}
				}
				if known {
					s.vars[k] = v
				} else {
					kwargs.Set(k, v)
				}
			}
		}
		s.vars["kwargs"] = kwargs
		for i, p := range m.params {
			if _, ok := s.vars[p]; ok {
				continue
			}
			if m.defaults[i] != nil {
				v, err := r.eval(m.defaults[i], s)
				if err != nil {
					return nil, err
				}
				s.vars[p] = v
			} else {
				s.vars[p] = Undefined{hint: fmt.Sprintf("parameter '%s' was not provided", p)}
			}
		}
		var sb strings.Builder
		if err := r.exec(m.body, s, &sb); err != nil {
			return nil, err
		}
		return sb.String(), nil
	case Undefined:
		return nil, errorf(line, "%s", undefinedMsg(f))
	}
	return nil, errorf(line, "'%s' object is not callable", typeName(fn))
}

func undefinedMsg(u Undefined) string {
	if u.hint == "" {
		return "undefined value"
	}
	return u.hint
}

func (r *renderer) evalArgs(args []expr, kwargs []kwarg, sc *scope) ([]Value, *Dict, error) {
	var vals []Value
	for _, a := range args {
		v, err := r.eval(a, sc)
		if err != nil {
			return nil, nil, err
		}
		vals = append(vals, v)
	}
	var kw *Dict
	if len(kwargs) > 0 {
		kw = NewDict()
		for _, k := range kwargs {
			v, err := r.eval(k.e, sc)
			if err != nil {
				return nil, nil, err
			}
			kw.Set(k.name, v)
		}
	}
	return vals, kw, nil
}

func (r *renderer) eval(e expr, sc *scope) (Value, error) {
	switch e.(type) {
	case *constExpr, *nameExpr:
	default:
		// An operation is a step: one statement may hold thousands.
		if err := r.addSteps(r.line, 1); err != nil {
			return nil, err
		}
	}
	return r.evalNode(e, sc)
}

// evalNode evaluates e (eval has counted it).
func (r *renderer) evalNode(e expr, sc *scope) (Value, error) {
	switch e := e.(type) {
	case *constExpr:
		return e.v, nil
	case *nameExpr:
		if v, ok := sc.lookup(e.name); ok {
			return v, nil
		}
		if g, ok := globals[e.name]; ok {
			return g, nil
		}
		return Undefined{hint: fmt.Sprintf("'%s' is undefined", e.name)}, nil
	case *attrExpr:
		obj, err := r.eval(e.obj, sc)
		if err != nil {
			return nil, err
		}
		return getAttr(obj, e.name, e.line)
	case *itemExpr:
		obj, err := r.eval(e.obj, sc)
		if err != nil {
			return nil, err
		}
		key, err := r.eval(e.key, sc)
		if err != nil {
			return nil, err
		}
		return getItem(obj, key, e.line)
	case *sliceExpr:
		obj, err := r.eval(e.obj, sc)
		if err != nil {
			return nil, err
		}
		var idx [3]Value
		for i, p := range []expr{e.lo, e.hi, e.step} {
			if p == nil {
				continue
			}
			if idx[i], err = r.eval(p, sc); err != nil {
				return nil, err
			}
		}
		return r.charged(e.line, nil, func() (Value, error) { return slice(obj, idx[0], idx[1], idx[2], e.line) })
	case *callExpr:
		// Methods are looked up as attributes and called.
		fn, err := r.eval(e.fn, sc)
		if err != nil {
			return nil, err
		}
		args, kw, err := r.evalArgs(e.args, e.kwargs, sc)
		if err != nil {
			return nil, err
		}
		return r.charged(e.line, args, func() (Value, error) { return r.call(fn, args, kw, e.line) })
	case *filterExpr:
		v, err := r.eval(e.arg, sc)
		if err != nil {
			return nil, err
		}
		args, kw, err := r.evalArgs(e.args, e.kwargs, sc)
		if err != nil {
			return nil, err
		}
		in := args
		if _, isStr := v.(string); !cheapFilters[e.name] || isStr { // a string's length counts its characters
			in = append([]Value{v}, args...)
		}
		return r.charged(e.line, in, func() (Value, error) { return r.applyFilter(e.name, v, args, kw, e.line) })
	case *testExpr:
		v, err := r.eval(e.arg, sc)
		if err != nil {
			return nil, err
		}
		args, _, err := r.evalArgs(e.args, nil, sc)
		if err != nil {
			return nil, err
		}
		if err := r.charge(e.line, append([]Value{v}, args...)...); err != nil {
			return nil, err
		}
		ok, err := r.applyTest(e.name, v, args, e.line)
		if err != nil {
			return nil, err
		}
		return ok != e.negate, nil
	case *binExpr:
		l, err := r.eval(e.l, sc)
		if err != nil {
			return nil, err
		}
		switch e.op {
		case "and":
			if !truthy(l) {
				return l, nil
			}
			return r.eval(e.r, sc)
		case "or":
			if truthy(l) {
				return l, nil
			}
			return r.eval(e.r, sc)
		}
		rv, err := r.eval(e.r, sc)
		if err != nil {
			return nil, err
		}
		return r.charged(e.line, []Value{l, rv}, func() (Value, error) { return r.binary(e.op, l, rv, e.line) })
	case *unaryExpr:
		x, err := r.eval(e.x, sc)
		if err != nil {
			return nil, err
		}
		switch e.op {
		case "not":
			return !truthy(x), nil
		case "-":
			switch x := x.(type) {
			case int64:
				return -x, nil
			case float64:
				return -x, nil
			case bool:
				if x {
					return int64(-1), nil
				}
				return int64(0), nil
			}
			return nil, errorf(e.line, "bad operand type for unary -: '%s'", typeName(x))
		default:
			switch x.(type) {
			case int64, float64:
				return x, nil
			}
			return nil, errorf(e.line, "bad operand type for unary +: '%s'", typeName(x))
		}
	case *compareExpr:
		l, err := r.eval(e.first, sc)
		if err != nil {
			return nil, err
		}
		for i, op := range e.ops {
			rv, err := r.eval(e.rest[i], sc)
			if err != nil {
				return nil, err
			}
			if err := r.charge(e.line, l, rv); err != nil {
				return nil, err
			}
			ok, err := compare(op, l, rv, e.line)
			if err != nil {
				return nil, err
			}
			if !ok {
				return false, nil
			}
			l = rv
		}
		return true, nil
	case *condExpr:
		t, err := r.eval(e.test, sc)
		if err != nil {
			return nil, err
		}
		if truthy(t) {
			return r.eval(e.yes, sc)
		}
		if e.no == nil {
			return Undefined{hint: "the inline if expression on line " + fmt.Sprint(e.line) + " evaluated to false and no else section was defined"}, nil
		}
		return r.eval(e.no, sc)
	case *listExpr:
		out := make([]any, 0, len(e.items))
		for _, it := range e.items {
			v, err := r.eval(it, sc)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		if e.tuple {
			return Tuple(out), nil
		}
		return out, nil
	case *dictExpr:
		d := NewDict()
		for i := range e.keys {
			k, err := r.eval(e.keys[i], sc)
			if err != nil {
				return nil, err
			}
			v, err := r.eval(e.vals[i], sc)
			if err != nil {
				return nil, err
			}
			if !d.set(k, v) {
				return nil, errorf(e.line, "unhashable type: '%s'", typeName(k))
			}
		}
		return d, nil
	}
	return nil, fmt.Errorf("jinja: unknown expression %T", e)
}

// dictMethods are the names that obj.name resolves to a method of a dict
// before its keys (jinja2 tries getattr first).
var dictMethods = map[string]bool{"items": true, "keys": true, "values": true, "get": true, "copy": true,
	"update": true, "pop": true, "popitem": true, "setdefault": true, "clear": true, "fromkeys": true}

// getAttr is jinja2's obj.name: the attribute (method) first, then the item.
func getAttr(obj Value, name string, line int) (Value, error) {
	switch o := obj.(type) {
	case Undefined:
		return nil, errorf(line, "%s", undefinedMsg(o))
	case *Dict:
		if dictMethods[name] {
			return method(obj, name), nil
		}
		if v, ok := o.get(name); ok {
			return v, nil
		}
		return Undefined{hint: fmt.Sprintf("'dict object' has no attribute '%s'", name)}, nil
	case *namespace:
		if v, ok := o.d.get(name); ok {
			return v, nil
		}
	case *loopObj:
		if v, ok := o.attr(name); ok {
			return v, nil
		}
	case string, []any, Tuple:
		if m := method(obj, name); m != nil {
			return m, nil
		}
	}
	return Undefined{hint: fmt.Sprintf("'%s object' has no attribute '%s'", typeName(obj), name)}, nil
}

// getItem is jinja2's obj[key]: the item first, then the attribute.
func getItem(obj Value, key Value, line int) (Value, error) {
	switch o := obj.(type) {
	case Undefined:
		return nil, errorf(line, "%s", undefinedMsg(o))
	case *Dict:
		if v, ok := o.get(key); ok {
			return v, nil
		}
		if k, ok := key.(string); ok && dictMethods[k] {
			return method(obj, k), nil
		}
		return Undefined{hint: fmt.Sprintf("'dict object' has no attribute %s", repr(key))}, nil
	case []any, Tuple, string:
		i, ok := toIndex(key)
		if !ok {
			if k, isStr := key.(string); isStr {
				return getAttr(obj, k, line)
			}
			return Undefined{hint: fmt.Sprintf("'%s object' has no attribute %s", typeName(obj), repr(key))}, nil
		}
		if s, isStr := o.(string); isStr {
			rs := []rune(s)
			if i < 0 {
				i += len(rs)
			}
			if i < 0 || i >= len(rs) {
				return Undefined{hint: "string index out of range"}, nil
			}
			return string(rs[i]), nil
		}
		l := asList(o)
		if i < 0 {
			i += len(l)
		}
		if i < 0 || i >= len(l) {
			return Undefined{hint: fmt.Sprintf("%s object has no element %d", typeName(obj), i)}, nil
		}
		return l[i], nil
	case *namespace, *loopObj:
		if k, ok := key.(string); ok {
			return getAttr(obj, k, line)
		}
	}
	return Undefined{hint: fmt.Sprintf("'%s object' has no attribute %s", typeName(obj), repr(key))}, nil
}

func toIndex(v Value) (int, bool) {
	switch v := v.(type) {
	case int64:
		return int(v), true
	case bool:
		if v {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// slice is Python's obj[lo:hi:step].
func slice(obj, lo, hi, step Value, line int) (Value, error) {
	var n int
	var runes []rune
	switch o := obj.(type) {
	case string:
		runes = []rune(o)
		n = len(runes)
	case []any, Tuple:
		n = len(asList(o))
	case Undefined:
		return nil, errorf(line, "%s", undefinedMsg(o))
	default:
		return nil, errorf(line, "'%s' object is not subscriptable", typeName(obj))
	}
	st := 1
	if step != nil {
		s, ok := toIndex(step)
		if !ok && step != nil {
			return nil, errorf(line, "slice indices must be integers or None")
		}
		if s == 0 {
			return nil, errorf(line, "slice step cannot be zero")
		}
		st = s
	}
	bound := func(v Value, def int) (int, error) {
		if v == nil {
			return def, nil
		}
		i, ok := toIndex(v)
		if !ok {
			return 0, errorf(line, "slice indices must be integers or None")
		}
		if i < 0 {
			i += n
			if i < 0 {
				if st < 0 {
					i = -1
				} else {
					i = 0
				}
			}
		} else if i >= n {
			if st < 0 {
				i = n - 1
			} else {
				i = n
			}
		}
		return i, nil
	}
	var a, b int
	var err error
	if st > 0 {
		if a, err = bound(lo, 0); err != nil {
			return nil, err
		}
		if b, err = bound(hi, n); err != nil {
			return nil, err
		}
	} else {
		if a, err = bound(lo, n-1); err != nil {
			return nil, err
		}
		if b, err = bound(hi, -1); err != nil {
			return nil, err
		}
	}
	var idx []int
	for i := a; (st > 0 && i < b) || (st < 0 && i > b); i += st {
		idx = append(idx, i)
	}
	if runes != nil || obj == "" {
		out := make([]rune, len(idx))
		for k, i := range idx {
			out[k] = runes[i]
		}
		return string(out), nil
	}
	l := asList(obj)
	out := make([]any, len(idx))
	for k, i := range idx {
		out[k] = l[i]
	}
	if _, ok := obj.(Tuple); ok {
		return Tuple(out), nil
	}
	return out, nil
}

func toFloat(v Value) (float64, bool) {
	switch v := v.(type) {
	case int64:
		return float64(v), true
	case float64:
		return v, true
	case bool:
		if v {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

func isInt(v Value) (int64, bool) {
	switch v := v.(type) {
	case int64:
		return v, true
	case bool:
		if v {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

func (r *renderer) binary(op string, l, rv Value, line int) (Value, error) {
	if op == "~" {
		s := toStrN(l, r.lim.MaxOutput+1) + toStrN(rv, r.lim.MaxOutput+1)
		if len(s) > r.lim.MaxOutput {
			return nil, errorf(line, "string exceeds %d bytes", r.lim.MaxOutput)
		}
		return s, nil
	}
	li, lInt := isInt(l)
	ri, rInt := isInt(rv)
	lf, lNum := toFloat(l)
	rf, rNum := toFloat(rv)
	bad := func() (Value, error) {
		return nil, errorf(line, "unsupported operand type(s) for %s: '%s' and '%s'", op, typeName(l), typeName(rv))
	}
	switch op {
	case "+":
		switch {
		case lInt && rInt:
			return li + ri, nil
		case lNum && rNum:
			return lf + rf, nil
		}
		if ls, ok := l.(string); ok {
			if rs, ok := rv.(string); ok {
				if len(ls)+len(rs) > r.lim.MaxOutput {
					return nil, errorf(line, "string exceeds %d bytes", r.lim.MaxOutput)
				}
				return ls + rs, nil
			}
		}
		if ll, ok := l.([]any); ok {
			if rl, ok := rv.([]any); ok {
				if len(ll)+len(rl) > maxListLen {
					return nil, errorf(line, "list longer than %d items", maxListLen)
				}
				return append(append([]any{}, ll...), rl...), nil
			}
		}
		if lt, ok := l.(Tuple); ok {
			if rt, ok := rv.(Tuple); ok {
				return Tuple(append(append([]any{}, lt...), rt...)), nil
			}
		}
		return bad()
	case "-":
		switch {
		case lInt && rInt:
			return li - ri, nil
		case lNum && rNum:
			return lf - rf, nil
		}
		return bad()
	case "*":
		switch {
		case lInt && rInt:
			return li * ri, nil
		case lNum && rNum:
			return lf * rf, nil
		}
		if s, ok := l.(string); ok && rInt {
			if ri > 0 && int64(len(s))*ri > int64(r.lim.MaxOutput) {
				return nil, errorf(line, "string exceeds %d bytes", r.lim.MaxOutput)
			}
			if ri < 0 {
				ri = 0
			}
			return strings.Repeat(s, int(ri)), nil
		}
		if ll, ok := l.([]any); ok && rInt {
			if ri > 0 && int64(len(ll))*ri > maxListLen {
				return nil, errorf(line, "list longer than %d items", maxListLen)
			}
			var out []any
			for k := int64(0); k < ri; k++ {
				out = append(out, ll...)
			}
			if out == nil {
				out = []any{}
			}
			return out, nil
		}
		return bad()
	case "/":
		if lNum && rNum {
			if rf == 0 {
				return nil, errorf(line, "division by zero")
			}
			return lf / rf, nil
		}
		return bad()
	case "//":
		if lInt && rInt {
			if ri == 0 {
				return nil, errorf(line, "integer division or modulo by zero")
			}
			q := li / ri
			if (li%ri != 0) && ((li < 0) != (ri < 0)) {
				q--
			}
			return q, nil
		}
		if lNum && rNum {
			if rf == 0 {
				return nil, errorf(line, "float floor division by zero")
			}
			return math.Floor(lf / rf), nil
		}
		return bad()
	case "%":
		if s, ok := l.(string); ok {
			return percentFormat(s, rv, line)
		}
		if lInt && rInt {
			if ri == 0 {
				return nil, errorf(line, "integer division or modulo by zero")
			}
			m := li % ri
			if m != 0 && ((m < 0) != (ri < 0)) {
				m += ri
			}
			return m, nil
		}
		if lNum && rNum {
			if rf == 0 {
				return nil, errorf(line, "float modulo")
			}
			m := math.Mod(lf, rf)
			if m != 0 && ((m < 0) != (rf < 0)) {
				m += rf
			}
			return m, nil
		}
		return bad()
	case "**":
		if lInt && rInt && ri >= 0 {
			res := int64(1)
			for k := int64(0); k < ri && k < 64; k++ {
				res *= li
			}
			return res, nil
		}
		if lNum && rNum {
			return math.Pow(lf, rf), nil
		}
		return bad()
	}
	return bad()
}

// percentFormat is Python's "fmt % args": flags (-+ 0#), width,
// precision and the conversions s r a d i u f F e E g G x X o c and %%.
func percentFormat(f string, args Value, line int) (Value, error) {
	var list []any
	if t, ok := args.(Tuple); ok {
		list = t
	} else {
		list = []any{args}
	}
	var b strings.Builder
	k := 0
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			b.WriteByte(f[i])
			continue
		}
		i++
		j := i
		for j < len(f) && strings.IndexByte("-+ 0#", f[j]) >= 0 {
			j++
		}
		for j < len(f) && (f[j] >= '0' && f[j] <= '9' || f[j] == '.') {
			j++
		}
		if j >= len(f) {
			return nil, errorf(line, "incomplete format")
		}
		spec, conv := f[i:j], f[j]
		i = j
		if conv == '%' {
			b.WriteByte('%')
			continue
		}
		if k >= len(list) {
			return nil, errorf(line, "not enough arguments for format string")
		}
		a := list[k]
		k++
		switch conv {
		case 's', 'r', 'a':
			str := toStr(a)
			if conv != 's' {
				str = repr(a)
			}
			fmt.Fprintf(&b, "%"+strings.Trim(spec, "+ 0#")+"s", str)
		case 'd', 'i', 'u', 'x', 'X', 'o', 'c':
			n, ok := isInt(a)
			if !ok {
				fl, isF := a.(float64)
				if !isF || conv == 'x' || conv == 'X' || conv == 'o' || conv == 'c' {
					return nil, errorf(line, "%%%c format: an integer is required, not %s", conv, typeName(a))
				}
				n = int64(fl)
			}
			verb := map[byte]string{'d': "d", 'i': "d", 'u': "d", 'x': "x", 'X': "X", 'o': "o", 'c': "c"}[conv]
			if conv == 'c' {
				b.WriteRune(rune(n))
				continue
			}
			if conv == 'o' && strings.Contains(spec, "#") {
				spec = strings.ReplaceAll(spec, "#", "")
				fmt.Fprintf(&b, "0o%"+spec+verb, n)
				continue
			}
			fmt.Fprintf(&b, "%"+spec+verb, n)
		case 'f', 'F', 'e', 'E', 'g', 'G':
			fl, ok := toFloat(a)
			if !ok {
				return nil, errorf(line, "%%%c format: a real number is required, not %s", conv, typeName(a))
			}
			if !strings.Contains(spec, ".") {
				spec += ".6"
			}
			verb := string(conv)
			if conv == 'F' {
				verb = "f"
			}
			fmt.Fprintf(&b, "%"+spec+verb, fl)
		default:
			return nil, errorf(line, "unsupported format character '%c'", conv)
		}
	}
	if k < len(list) {
		return nil, errorf(line, "not all arguments converted during string formatting")
	}
	return b.String(), nil
}

// equal is Python's ==.
func equal(a, b Value) bool {
	n := 0
	return equalN(a, b, &n)
}

func equalN(a, b Value, n *int) bool {
	*n++
	if *n > maxCompare {
		panic(&limitError{msg: fmt.Sprintf("comparison of values with more than %d items", maxCompare)})
	}
	if af, ok := toFloat(a); ok {
		if bf, ok := toFloat(b); ok {
			return af == bf
		}
		return false
	}
	switch a := a.(type) {
	case nil:
		return b == nil
	case Undefined:
		_, ok := b.(Undefined)
		return ok
	case string:
		bs, ok := b.(string)
		return ok && a == bs
	case []any, Tuple:
		_, aTuple := a.(Tuple)
		_, bTuple := b.(Tuple)
		bl := asList(b)
		al := asList(a)
		if aTuple != bTuple || (bl == nil && b == nil) {
			return false
		}
		if _, ok := b.([]any); !ok && !bTuple {
			return false
		}
		if len(al) != len(bl) {
			return false
		}
		for i := range al {
			if !equalN(al[i], bl[i], n) {
				return false
			}
		}
		return true
	case *Dict:
		bd, ok := b.(*Dict)
		if !ok || a.Len() != bd.Len() {
			return false
		}
		for i, k := range a.keys {
			bv, ok := bd.get(k)
			if !ok || !equalN(a.value(i), bv, n) {
				return false
			}
		}
		return true
	}
	return a == b
}

// compare evaluates one comparison operator.
func compare(op string, a, b Value, line int) (bool, error) {
	switch op {
	case "==":
		return equal(a, b), nil
	case "!=":
		return !equal(a, b), nil
	case "in", "notin":
		in, err := contains(b, a, line)
		if err != nil {
			return false, err
		}
		return in == (op == "in"), nil
	}
	c, err := order(a, b, line, op)
	if err != nil {
		return false, err
	}
	switch op {
	case "<":
		return c < 0, nil
	case ">":
		return c > 0, nil
	case "<=":
		return c <= 0, nil
	default:
		return c >= 0, nil
	}
}

// order compares two values as Python's < does: numbers, strings, lists.
func order(a, b Value, line int, op string) (int, error) {
	if af, ok := toFloat(a); ok {
		if bf, ok := toFloat(b); ok {
			switch {
			case af < bf:
				return -1, nil
			case af > bf:
				return 1, nil
			}
			return 0, nil
		}
	}
	if as, ok := a.(string); ok {
		if bs, ok := b.(string); ok {
			return strings.Compare(as, bs), nil
		}
	}
	al, bl := asList(a), asList(b)
	if al != nil && bl != nil {
		for i := 0; i < len(al) && i < len(bl); i++ {
			if !equal(al[i], bl[i]) {
				return order(al[i], bl[i], line, op)
			}
		}
		return len(al) - len(bl), nil
	}
	return 0, errorf(line, "'%s' not supported between instances of '%s' and '%s'", op, typeName(a), typeName(b))
}

// contains is Python's "needle in haystack".
func contains(haystack, needle Value, line int) (bool, error) {
	switch h := haystack.(type) {
	case string:
		n, ok := needle.(string)
		if !ok {
			return false, errorf(line, "'in <string>' requires string as left operand, not %s", typeName(needle))
		}
		return strings.Contains(h, n), nil
	case []any, Tuple:
		for _, e := range asList(h) {
			if equal(e, needle) {
				return true, nil
			}
		}
		return false, nil
	case *Dict:
		_, in := h.get(needle)
		return in, nil
	case Undefined:
		return false, nil
	case *namespace:
		_, in := h.d.get(needle)
		return in, nil
	}
	return false, errorf(line, "argument of type '%s' is not iterable", typeName(haystack))
}

// pyIsSpace is the whitespace Python's str.strip() and split() remove.
func pyIsSpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1C && r <= 0x1F)
}
