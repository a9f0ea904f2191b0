package jinja

import "strconv"

// Statements.
type node interface{}

type (
	textNode   struct{ s string }
	outputNode struct {
		e    expr
		line int
	}
	ifNode struct {
		conds  []expr
		bodies [][]node
		els    []node
		line   int
	}
	forNode struct {
		targets   []string
		iter      expr
		cond      expr // nil: none
		body, els []node
		line      int
	}
	setNode struct {
		names []string // one name, or several for tuple unpacking
		ns    string   // "ns" of {% set ns.attr = ... %}, else ""
		attr  string
		e     expr // nil for a block set
		body  []node
		line  int
	}
	macroNode struct {
		name     string
		params   []string
		defaults []expr // nil where none
		body     []node
		line     int
	}
	callBlockNode struct {
		call *callExpr
		body []node
		line int
	}
	filterBlockNode struct {
		filter *filterExpr // its arg is nil: the body
		body   []node
		line   int
	}
	loopCtlNode struct {
		brk  bool
		line int
	}
)

// Expressions.
type expr interface{}

type (
	constExpr struct{ v Value }
	nameExpr  struct {
		name string
		line int
	}
	attrExpr struct {
		obj  expr
		name string
		line int
	}
	itemExpr struct {
		obj, key expr
		line     int
	}
	sliceExpr struct {
		obj, lo, hi, step expr // nil where absent
		line              int
	}
	callExpr struct {
		fn     expr
		args   []expr
		kwargs []kwarg
		line   int
	}
	filterExpr struct {
		arg    expr
		name   string
		args   []expr
		kwargs []kwarg
		line   int
	}
	testExpr struct {
		arg    expr
		name   string
		args   []expr
		negate bool
		line   int
	}
	binExpr struct {
		op   string
		l, r expr
		line int
	}
	unaryExpr struct {
		op   string // "-", "+", "not"
		x    expr
		line int
	}
	compareExpr struct {
		first expr
		ops   []string
		rest  []expr
		line  int
	}
	condExpr struct {
		test, yes, no expr // no may be nil
		line          int
	}
	listExpr struct {
		items []expr
		tuple bool
	}
	dictExpr struct {
		keys, vals []expr
		line       int
	}
)

type kwarg struct {
	name string
	e    expr
}

// maxNesting bounds the depth of nested statements and expressions, so
// that a hostile template cannot exhaust the stack while parsing.
const maxNesting = 200

type parser struct {
	segs    []segment
	pos     int
	depth   int
	endToks []token // the tokens of the end tag parseBody stopped at
}

// parseTemplate parses the segments into statements.
func parseTemplate(segs []segment) ([]node, error) {
	p := &parser{segs: segs}
	body, end, err := p.parseBody(nil)
	if err != nil {
		return nil, err
	}
	if end != "" {
		return nil, &Error{Line: p.segs[p.pos-1].line, Msg: "unexpected {% " + end + " %}"}
	}
	return body, nil
}

// parseBody parses statements until a block tag whose first word is in
// ends; it returns that word (its tokens are left in p.endToks).
func (p *parser) parseBody(ends []string) ([]node, string, error) {
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > maxNesting {
		line := 0
		if p.pos < len(p.segs) {
			line = p.segs[p.pos].line
		}
		return nil, "", &Error{Line: line, Msg: "statements nested too deeply"}
	}
	var out []node
	for p.pos < len(p.segs) {
		s := p.segs[p.pos]
		p.pos++
		switch s.kind {
		case segText:
			out = append(out, &textNode{s: s.text})
		case segVar:
			ts, err := lexExpr(s.text, s.line)
			if err != nil {
				return nil, "", err
			}
			ep := &exprParser{toks: ts, p: p}
			e, err := ep.parseExpr()
			if err != nil {
				return nil, "", err
			}
			if err := ep.expectEOF(); err != nil {
				return nil, "", err
			}
			out = append(out, &outputNode{e: e, line: s.line})
		case segBlock:
			ts, err := lexExpr(s.text, s.line)
			if err != nil {
				return nil, "", err
			}
			if ts[0].kind != tkName {
				return nil, "", &Error{Line: s.line, Msg: "expected a statement name after {%"}
			}
			word := ts[0].s
			for _, e := range ends {
				if word == e {
					p.endToks = ts
					return out, word, nil
				}
			}
			ep := &exprParser{toks: ts, pos: 1, p: p}
			n, err := p.parseStatement(word, ep, s.line)
			if err != nil {
				return nil, "", err
			}
			if n != nil {
				out = append(out, n)
			}
		}
	}
	if len(ends) > 0 {
		line := 0
		if len(p.segs) > 0 {
			line = p.segs[len(p.segs)-1].line
		}
		return nil, "", &Error{Line: line, Msg: "missing {% " + ends[len(ends)-1] + " %}"}
	}
	return out, "", nil
}

func (p *parser) parseStatement(word string, ep *exprParser, line int) (node, error) {
	switch word {
	case "if":
		n := &ifNode{line: line}
		cond, err := ep.parseExpr()
		if err != nil {
			return nil, err
		}
		if err := ep.expectEOF(); err != nil {
			return nil, err
		}
		for {
			body, end, err := p.parseBody([]string{"elif", "else", "endif"})
			if err != nil {
				return nil, err
			}
			n.conds = append(n.conds, cond)
			n.bodies = append(n.bodies, body)
			switch end {
			case "elif":
				ep2 := &exprParser{toks: p.endToks, pos: 1, p: p}
				if cond, err = ep2.parseExpr(); err != nil {
					return nil, err
				}
				if err := ep2.expectEOF(); err != nil {
					return nil, err
				}
				continue
			case "else":
				if n.els, _, err = p.parseBody([]string{"endif"}); err != nil {
					return nil, err
				}
			}
			return n, nil
		}
	case "for":
		n := &forNode{line: line}
		for {
			t := ep.next()
			if t.kind != tkName {
				return nil, &Error{Line: t.line, Msg: "expected a loop variable name"}
			}
			n.targets = append(n.targets, t.s)
			if !ep.acceptOp(",") {
				break
			}
		}
		if t := ep.next(); t.kind != tkName || t.s != "in" {
			return nil, &Error{Line: t.line, Msg: "expected 'in' in for loop"}
		}
		var err error
		if n.iter, err = ep.parseCondless(); err != nil {
			return nil, err
		}
		if ep.acceptName("if") {
			if n.cond, err = ep.parseCondless(); err != nil {
				return nil, err
			}
		}
		if ep.acceptName("recursive") {
			return nil, &Error{Line: line, Msg: "recursive for loops are not supported"}
		}
		if err := ep.expectEOF(); err != nil {
			return nil, err
		}
		body, end, err := p.parseBody([]string{"else", "endfor"})
		if err != nil {
			return nil, err
		}
		n.body = body
		if end == "else" {
			if n.els, _, err = p.parseBody([]string{"endfor"}); err != nil {
				return nil, err
			}
		}
		return n, nil
	case "set":
		n := &setNode{line: line}
		t := ep.next()
		if t.kind != tkName {
			return nil, &Error{Line: t.line, Msg: "expected a name after set"}
		}
		if ep.acceptOp(".") {
			a := ep.next()
			if a.kind != tkName {
				return nil, &Error{Line: a.line, Msg: "expected an attribute name"}
			}
			n.ns, n.attr = t.s, a.s
		} else {
			n.names = []string{t.s}
			for ep.acceptOp(",") {
				t := ep.next()
				if t.kind != tkName {
					return nil, &Error{Line: t.line, Msg: "expected a name"}
				}
				n.names = append(n.names, t.s)
			}
		}
		if ep.acceptOp("=") {
			var err error
			if n.e, err = ep.parseTupleOrExpr(); err != nil {
				return nil, err
			}
			return n, ep.expectEOF()
		}
		if err := ep.expectEOF(); err != nil {
			return nil, err
		}
		body, _, err := p.parseBody([]string{"endset"})
		if err != nil {
			return nil, err
		}
		n.body = body
		return n, nil
	case "macro":
		n := &macroNode{line: line}
		t := ep.next()
		if t.kind != tkName {
			return nil, &Error{Line: t.line, Msg: "expected a macro name"}
		}
		n.name = t.s
		if !ep.acceptOp("(") {
			return nil, &Error{Line: line, Msg: "expected ( after the macro name"}
		}
		for !ep.acceptOp(")") {
			a := ep.next()
			if a.kind != tkName {
				return nil, &Error{Line: a.line, Msg: "expected a parameter name"}
			}
			n.params = append(n.params, a.s)
			var def expr
			if ep.acceptOp("=") {
				var err error
				if def, err = ep.parseExpr(); err != nil {
					return nil, err
				}
			}
			n.defaults = append(n.defaults, def)
			if !ep.acceptOp(",") {
				if !ep.acceptOp(")") {
					return nil, &Error{Line: line, Msg: "expected , or ) in macro parameters"}
				}
				break
			}
		}
		if err := ep.expectEOF(); err != nil {
			return nil, err
		}
		body, _, err := p.parseBody([]string{"endmacro"})
		if err != nil {
			return nil, err
		}
		n.body = body
		return n, nil
	case "call":
		e, err := ep.parseExpr()
		if err != nil {
			return nil, err
		}
		c, ok := e.(*callExpr)
		if !ok {
			return nil, &Error{Line: line, Msg: "expected a macro call after call"}
		}
		if err := ep.expectEOF(); err != nil {
			return nil, err
		}
		body, _, err := p.parseBody([]string{"endcall"})
		if err != nil {
			return nil, err
		}
		return &callBlockNode{call: c, body: body, line: line}, nil
	case "filter":
		t := ep.next()
		if t.kind != tkName {
			return nil, &Error{Line: t.line, Msg: "expected a filter name"}
		}
		f := &filterExpr{name: t.s, line: line}
		if ep.peekOp("(") {
			ep.next()
			var err error
			if f.args, f.kwargs, err = ep.parseArgs(); err != nil {
				return nil, err
			}
		}
		if err := ep.expectEOF(); err != nil {
			return nil, err
		}
		body, _, err := p.parseBody([]string{"endfilter"})
		if err != nil {
			return nil, err
		}
		return &filterBlockNode{filter: f, body: body, line: line}, nil
	case "break", "continue":
		return &loopCtlNode{brk: word == "break", line: line}, ep.expectEOF()
	case "generation", "endgeneration":
		// transformers' AssistantTracker marks assistant text; it renders
		// its body unchanged.
		return nil, nil
	}
	return nil, &Error{Line: line, Msg: "unknown statement {% " + word + " %}"}
}

// exprParser parses the tokens of one tag.
type exprParser struct {
	toks  []token
	pos   int
	p     *parser
	depth int
}

func (ep *exprParser) peek() token { return ep.toks[ep.pos] }

func (ep *exprParser) next() token {
	t := ep.toks[ep.pos]
	if t.kind != tkEOF {
		ep.pos++
	}
	return t
}

func (ep *exprParser) peekOp(op string) bool {
	t := ep.peek()
	return t.kind == tkOp && t.s == op
}

func (ep *exprParser) acceptOp(op string) bool {
	if ep.peekOp(op) {
		ep.pos++
		return true
	}
	return false
}

func (ep *exprParser) peekName(n string) bool {
	t := ep.peek()
	return t.kind == tkName && t.s == n
}

func (ep *exprParser) acceptName(n string) bool {
	if ep.peekName(n) {
		ep.pos++
		return true
	}
	return false
}

func (ep *exprParser) expectOp(op string) error {
	if !ep.acceptOp(op) {
		t := ep.peek()
		return &Error{Line: t.line, Msg: "expected " + strconvQuote(op) + ", found " + describe(t)}
	}
	return nil
}

func (ep *exprParser) expectEOF() error {
	if t := ep.peek(); t.kind != tkEOF {
		return &Error{Line: t.line, Msg: "unexpected " + describe(t)}
	}
	return nil
}

func describe(t token) string {
	switch t.kind {
	case tkEOF:
		return "end of tag"
	case tkString:
		return "string " + strconvQuote(t.s)
	}
	return strconvQuote(t.s)
}

func strconvQuote(s string) string { return strconv.Quote(s) }

func (ep *exprParser) enter() error {
	ep.depth++
	if ep.depth > maxNesting {
		return &Error{Line: ep.peek().line, Msg: "expression nested too deeply"}
	}
	return nil
}

// parseTupleOrExpr parses "a, b" as a tuple (set statements).
func (ep *exprParser) parseTupleOrExpr() (expr, error) {
	e, err := ep.parseExpr()
	if err != nil || !ep.peekOp(",") {
		return e, err
	}
	items := []expr{e}
	for ep.acceptOp(",") {
		if ep.peek().kind == tkEOF {
			break
		}
		e, err := ep.parseExpr()
		if err != nil {
			return nil, err
		}
		items = append(items, e)
	}
	return &listExpr{items: items, tuple: true}, nil
}

// parseExpr: conditional expression "a if b else c".
func (ep *exprParser) parseExpr() (expr, error) {
	if err := ep.enter(); err != nil {
		return nil, err
	}
	defer func() { ep.depth-- }()
	line := ep.peek().line
	e, err := ep.parseOr()
	if err != nil {
		return nil, err
	}
	for ep.acceptName("if") {
		test, err := ep.parseOr()
		if err != nil {
			return nil, err
		}
		c := &condExpr{test: test, yes: e, line: line}
		if ep.acceptName("else") {
			if c.no, err = ep.parseExpr(); err != nil {
				return nil, err
			}
		}
		e = c
	}
	return e, nil
}

// parseCondless parses an expression without a trailing "if" (for loops).
func (ep *exprParser) parseCondless() (expr, error) {
	if err := ep.enter(); err != nil {
		return nil, err
	}
	defer func() { ep.depth-- }()
	return ep.parseOr()
}

func (ep *exprParser) parseOr() (expr, error) {
	l, err := ep.parseAnd()
	if err != nil {
		return nil, err
	}
	for ep.peekName("or") {
		line := ep.next().line
		r, err := ep.parseAnd()
		if err != nil {
			return nil, err
		}
		l = &binExpr{op: "or", l: l, r: r, line: line}
	}
	return l, nil
}

func (ep *exprParser) parseAnd() (expr, error) {
	l, err := ep.parseNot()
	if err != nil {
		return nil, err
	}
	for ep.peekName("and") {
		line := ep.next().line
		r, err := ep.parseNot()
		if err != nil {
			return nil, err
		}
		l = &binExpr{op: "and", l: l, r: r, line: line}
	}
	return l, nil
}

func (ep *exprParser) parseNot() (expr, error) {
	if ep.peekName("not") {
		line := ep.next().line
		if err := ep.enter(); err != nil {
			return nil, err
		}
		defer func() { ep.depth-- }()
		x, err := ep.parseNot()
		if err != nil {
			return nil, err
		}
		return &unaryExpr{op: "not", x: x, line: line}, nil
	}
	return ep.parseCompare()
}

func (ep *exprParser) parseCompare() (expr, error) {
	line := ep.peek().line
	first, err := ep.parseMath1()
	if err != nil {
		return nil, err
	}
	c := &compareExpr{first: first, line: line}
	for {
		t := ep.peek()
		var op string
		switch {
		case t.kind == tkOp && (t.s == "==" || t.s == "!=" || t.s == "<" || t.s == ">" || t.s == "<=" || t.s == ">="):
			op = t.s
			ep.next()
		case t.kind == tkName && t.s == "in":
			op = "in"
			ep.next()
		case t.kind == tkName && t.s == "not" && ep.toks[ep.pos+1].kind == tkName && ep.toks[ep.pos+1].s == "in":
			op = "notin"
			ep.pos += 2
		}
		if op == "" {
			break
		}
		r, err := ep.parseMath1()
		if err != nil {
			return nil, err
		}
		c.ops = append(c.ops, op)
		c.rest = append(c.rest, r)
	}
	if len(c.ops) == 0 {
		return first, nil
	}
	return c, nil
}

func (ep *exprParser) parseMath1() (expr, error) {
	l, err := ep.parseConcat()
	if err != nil {
		return nil, err
	}
	for ep.peekOp("+") || ep.peekOp("-") {
		t := ep.next()
		r, err := ep.parseConcat()
		if err != nil {
			return nil, err
		}
		l = &binExpr{op: t.s, l: l, r: r, line: t.line}
	}
	return l, nil
}

func (ep *exprParser) parseConcat() (expr, error) {
	l, err := ep.parseMath2()
	if err != nil {
		return nil, err
	}
	for ep.peekOp("~") {
		t := ep.next()
		r, err := ep.parseMath2()
		if err != nil {
			return nil, err
		}
		l = &binExpr{op: "~", l: l, r: r, line: t.line}
	}
	return l, nil
}

func (ep *exprParser) parseMath2() (expr, error) {
	l, err := ep.parsePow()
	if err != nil {
		return nil, err
	}
	for ep.peekOp("*") || ep.peekOp("/") || ep.peekOp("//") || ep.peekOp("%") {
		t := ep.next()
		r, err := ep.parsePow()
		if err != nil {
			return nil, err
		}
		l = &binExpr{op: t.s, l: l, r: r, line: t.line}
	}
	return l, nil
}

func (ep *exprParser) parsePow() (expr, error) {
	l, err := ep.parseUnary(true)
	if err != nil {
		return nil, err
	}
	for ep.peekOp("**") {
		t := ep.next()
		r, err := ep.parseUnary(true)
		if err != nil {
			return nil, err
		}
		l = &binExpr{op: "**", l: l, r: r, line: t.line}
	}
	return l, nil
}

func (ep *exprParser) parseUnary(withFilter bool) (expr, error) {
	if err := ep.enter(); err != nil {
		return nil, err
	}
	defer func() { ep.depth-- }()
	var e expr
	var err error
	if ep.peekOp("-") || ep.peekOp("+") {
		t := ep.next()
		x, err := ep.parseUnary(false)
		if err != nil {
			return nil, err
		}
		e = &unaryExpr{op: t.s, x: x, line: t.line}
	} else if e, err = ep.parsePrimary(); err != nil {
		return nil, err
	}
	if e, err = ep.parsePostfix(e); err != nil {
		return nil, err
	}
	if withFilter {
		return ep.parseFilterExpr(e)
	}
	return e, nil
}

func (ep *exprParser) parsePrimary() (expr, error) {
	t := ep.next()
	switch t.kind {
	case tkName:
		switch t.s {
		case "true", "True":
			return &constExpr{v: true}, nil
		case "false", "False":
			return &constExpr{v: false}, nil
		case "none", "None":
			return &constExpr{v: nil}, nil
		}
		return &nameExpr{name: t.s, line: t.line}, nil
	case tkString:
		s := t.s
		for ep.peek().kind == tkString {
			s += ep.next().s
		}
		return &constExpr{v: s}, nil
	case tkInt:
		n, err := strconv.ParseInt(t.s, 10, 64)
		if err != nil {
			f, _ := strconv.ParseFloat(t.s, 64)
			return &constExpr{v: f}, nil
		}
		return &constExpr{v: n}, nil
	case tkFloat:
		f, err := strconv.ParseFloat(t.s, 64)
		if err != nil {
			return nil, &Error{Line: t.line, Msg: "bad number " + t.s}
		}
		return &constExpr{v: f}, nil
	case tkOp:
		switch t.s {
		case "(":
			if ep.acceptOp(")") {
				return &listExpr{tuple: true}, nil
			}
			e, err := ep.parseExpr()
			if err != nil {
				return nil, err
			}
			if ep.peekOp(",") {
				items := []expr{e}
				for ep.acceptOp(",") {
					if ep.peekOp(")") {
						break
					}
					e, err := ep.parseExpr()
					if err != nil {
						return nil, err
					}
					items = append(items, e)
				}
				e = &listExpr{items: items, tuple: true}
			}
			return e, ep.expectOp(")")
		case "[":
			l := &listExpr{}
			for !ep.acceptOp("]") {
				e, err := ep.parseExpr()
				if err != nil {
					return nil, err
				}
				l.items = append(l.items, e)
				if !ep.acceptOp(",") {
					if err := ep.expectOp("]"); err != nil {
						return nil, err
					}
					break
				}
			}
			return l, nil
		case "{":
			d := &dictExpr{line: t.line}
			for !ep.acceptOp("}") {
				k, err := ep.parseExpr()
				if err != nil {
					return nil, err
				}
				if err := ep.expectOp(":"); err != nil {
					return nil, err
				}
				v, err := ep.parseExpr()
				if err != nil {
					return nil, err
				}
				d.keys = append(d.keys, k)
				d.vals = append(d.vals, v)
				if !ep.acceptOp(",") {
					if err := ep.expectOp("}"); err != nil {
						return nil, err
					}
					break
				}
			}
			return d, nil
		}
	}
	return nil, &Error{Line: t.line, Msg: "unexpected " + describe(t)}
}

func (ep *exprParser) parsePostfix(e expr) (expr, error) {
	for {
		t := ep.peek()
		if t.kind != tkOp {
			return e, nil
		}
		switch t.s {
		case ".":
			ep.next()
			a := ep.next()
			switch a.kind {
			case tkName:
				e = &attrExpr{obj: e, name: a.s, line: a.line}
			case tkInt:
				n, _ := strconv.ParseInt(a.s, 10, 64)
				e = &itemExpr{obj: e, key: &constExpr{v: n}, line: a.line}
			default:
				return nil, &Error{Line: a.line, Msg: "expected an attribute name after ."}
			}
		case "[":
			ep.next()
			var err error
			if e, err = ep.parseSubscript(e, t.line); err != nil {
				return nil, err
			}
		case "(":
			ep.next()
			args, kwargs, err := ep.parseArgs()
			if err != nil {
				return nil, err
			}
			e = &callExpr{fn: e, args: args, kwargs: kwargs, line: t.line}
		default:
			return e, nil
		}
	}
}

func (ep *exprParser) parseSubscript(obj expr, line int) (expr, error) {
	var parts [3]expr
	n := 0
	isSlice := false
	for {
		if ep.peekOp(":") {
			ep.next()
			isSlice = true
			n++
			if n > 2 {
				return nil, &Error{Line: line, Msg: "bad slice"}
			}
			continue
		}
		if ep.acceptOp("]") {
			break
		}
		e, err := ep.parseExpr()
		if err != nil {
			return nil, err
		}
		parts[n] = e
	}
	if !isSlice {
		if parts[0] == nil {
			return nil, &Error{Line: line, Msg: "empty subscript"}
		}
		return &itemExpr{obj: obj, key: parts[0], line: line}, nil
	}
	return &sliceExpr{obj: obj, lo: parts[0], hi: parts[1], step: parts[2], line: line}, nil
}

// parseArgs parses call arguments after "(" up to ")".
func (ep *exprParser) parseArgs() ([]expr, []kwarg, error) {
	var args []expr
	var kwargs []kwarg
	for !ep.acceptOp(")") {
		t := ep.peek()
		if t.kind == tkName && ep.toks[ep.pos+1].kind == tkOp && ep.toks[ep.pos+1].s == "=" {
			ep.pos += 2
			e, err := ep.parseExpr()
			if err != nil {
				return nil, nil, err
			}
			kwargs = append(kwargs, kwarg{name: t.s, e: e})
		} else {
			e, err := ep.parseExpr()
			if err != nil {
				return nil, nil, err
			}
			args = append(args, e)
		}
		if !ep.acceptOp(",") {
			if err := ep.expectOp(")"); err != nil {
				return nil, nil, err
			}
			break
		}
	}
	return args, kwargs, nil
}

func (ep *exprParser) parseFilterExpr(e expr) (expr, error) {
	for {
		if ep.peekOp("|") {
			ep.next()
			t := ep.next()
			if t.kind != tkName {
				return nil, &Error{Line: t.line, Msg: "expected a filter name after |"}
			}
			name := t.s
			for ep.peekOp(".") && ep.toks[ep.pos+1].kind == tkName {
				ep.next()
				name += "." + ep.next().s
			}
			f := &filterExpr{arg: e, name: name, line: t.line}
			if ep.acceptOp("(") {
				var err error
				if f.args, f.kwargs, err = ep.parseArgs(); err != nil {
					return nil, err
				}
			}
			e = f
			continue
		}
		if ep.peekName("is") {
			ep.next()
			te := &testExpr{arg: e, line: ep.peek().line}
			if ep.acceptName("not") {
				te.negate = true
			}
			t := ep.next()
			if t.kind != tkName {
				return nil, &Error{Line: t.line, Msg: "expected a test name after is"}
			}
			te.name = t.s
			if ep.acceptOp("(") {
				args, _, err := ep.parseArgs()
				if err != nil {
					return nil, err
				}
				te.args = args
			} else if nt := ep.peek(); nt.kind == tkString || nt.kind == tkInt || nt.kind == tkFloat ||
				(nt.kind == tkName && !isKeyword(nt.s)) || (nt.kind == tkOp && (nt.s == "[" || nt.s == "{")) {
				arg, err := ep.parsePrimary()
				if err != nil {
					return nil, err
				}
				if arg, err = ep.parsePostfix(arg); err != nil {
					return nil, err
				}
				te.args = []expr{arg}
			}
			e = te
			continue
		}
		return e, nil
	}
}

func isKeyword(s string) bool {
	switch s {
	case "and", "or", "else":
		return true
	}
	return false
}
