package constrain

import (
	"fmt"
	"sync"
)

// Bounds of the JSON grammar. Whitespace between tokens is bounded so that
// a model cannot loop on it: at most one space, or a newline followed by at
// most MaxIndent spaces or tabs (pretty-printed JSON nested a few levels
// deep), as llama.cpp's JSON grammars allow. None comes before or after the
// document: once it is complete, only a stop token may follow. Numbers are bounded too: at
// most MaxIntDigits digits before the point, MaxFracDigits after it and
// MaxExpDigits in the exponent.
const (
	MaxIndent     = 20
	MaxIntDigits  = 16
	MaxFracDigits = 16
	MaxExpDigits  = 3
)

// jsonRules builds the rules shared by every JSON grammar.
type jsonRules struct {
	b *builder
}

// ws is the whitespace allowed between tokens: "", " ", or "\n" then up
// to MaxIndent spaces or tabs.
func (j jsonRules) ws() sym {
	return ref(j.b.memoRule("ws", func() int {
		indent := j.b.repeat("indent", one(cls(setOf(" \t"))), nil, 0, MaxIndent)
		return j.b.rule("ws", nil, lit(" "), seq(lit("\n"), one(ref(indent))))
	}))
}

// char is one character of a JSON string: any valid UTF-8 character but
// '"', '\\' and the controls below 0x20, or an escape.
func (j jsonRules) char() sym {
	return ref(j.b.memoRule("char", func() int {
		b := j.b
		var plain byteSet
		plain.addRange(0x20, 0x7f)
		plain[0] &^= 1 << '"'
		plain[1] &^= 1 << ('\\' - 64)
		cont := cls(rangeSet(0x80, 0xbf))
		hex := cls(setOf("0123456789abcdefABCDEF"))
		return b.rule("char",
			one(cls(plain)),
			seq(lit(`\`), one(cls(setOf(`"\/bfnrt`)))),
			seq(lit(`\u`), []sym{hex, hex, hex, hex}),
			[]sym{cls(rangeSet(0xc2, 0xdf)), cont},
			[]sym{cls(setOf("\xe0")), cls(rangeSet(0xa0, 0xbf)), cont},
			[]sym{cls(setOf("\xe1\xe2\xe3\xe4\xe5\xe6\xe7\xe8\xe9\xea\xeb\xec\xee\xef")), cont, cont},
			[]sym{cls(setOf("\xed")), cls(rangeSet(0x80, 0x9f)), cont},
			[]sym{cls(setOf("\xf0")), cls(rangeSet(0x90, 0xbf)), cont, cont},
			[]sym{cls(rangeSet(0xf1, 0xf3)), cont, cont, cont},
			[]sym{cls(setOf("\xf4")), cls(rangeSet(0x80, 0x8f)), cont, cont},
		)
	}))
}

// str is a JSON string of lo to hi characters (hi < 0: no bound).
func (j jsonRules) str(lo, hi int) sym {
	return ref(j.b.memoRule(fmt.Sprintf("string{%d,%d}", lo, hi), func() int {
		var body int
		if lo == 0 && hi < 0 {
			body = j.b.star("chars", one(j.char()))
		} else {
			body = j.b.repeat(fmt.Sprintf("chars{%d,%d}", lo, hi), one(j.char()), nil, lo, hi)
		}
		return j.b.rule(fmt.Sprintf("string{%d,%d}", lo, hi), seq(lit(`"`), one(ref(body)), lit(`"`)))
	}))
}

// integer is a JSON integer: -?(0|[1-9][0-9]{0,MaxIntDigits-1}).
func (j jsonRules) integer() sym {
	return ref(j.b.memoRule("integer", func() int {
		b := j.b
		digits := b.repeat("int-digits", one(cls(rangeSet('0', '9'))), nil, 0, MaxIntDigits-1)
		nat := b.rule("natural", lit("0"), []sym{cls(rangeSet('1', '9')), ref(digits)})
		return b.rule("integer", one(ref(nat)), seq(lit("-"), one(ref(nat))))
	}))
}

// number is a JSON number, its parts bounded.
func (j jsonRules) number() sym {
	return ref(j.b.memoRule("number", func() int {
		b := j.b
		digit := one(cls(rangeSet('0', '9')))
		frac := b.repeat("frac-digits", digit, nil, 1, MaxFracDigits)
		exp := b.repeat("exp-digits", digit, nil, 1, MaxExpDigits)
		fracOpt := b.rule("frac", nil, seq(lit("."), one(ref(frac))))
		expOpt := b.rule("exp", nil, []sym{cls(setOf("eE")), ref(exp)}, []sym{cls(setOf("eE")), cls(setOf("+-")), ref(exp)})
		return b.rule("number", []sym{j.integer(), ref(fracOpt), ref(expOpt)})
	}))
}

// boolean is true or false; null is null.
func (j jsonRules) boolean() sym {
	return ref(j.b.memoRule("boolean", func() int { return j.b.rule("boolean", lit("true"), lit("false")) }))
}

func (j jsonRules) null() sym {
	return ref(j.b.memoRule("null", func() int { return j.b.rule("null", lit("null")) }))
}

// value is any JSON value.
func (j jsonRules) value() sym {
	if r, ok := j.b.memo["value"]; ok {
		return ref(r)
	}
	r := j.b.declare("value")
	j.b.memo["value"] = r
	j.b.define(r, one(j.object(ref(r))), one(j.array(ref(r))), one(j.str(0, -1)), one(j.number()),
		one(j.boolean()), one(j.null()))
	return ref(r)
}

// object is a JSON object whose member values match v, any keys.
func (j jsonRules) object(v sym) sym {
	return ref(j.b.memoRule(fmt.Sprintf("object(%d)", v.ref), func() int {
		b := j.b
		kv := seq(one(j.str(0, -1)), one(j.ws()), lit(":"), one(j.ws()), one(v), one(j.ws()))
		members := b.repeat(fmt.Sprintf("members(%d)", v.ref), kv, seq(lit(","), one(j.ws())), 0, -1)
		return b.rule(fmt.Sprintf("object(%d)", v.ref), seq(lit("{"), one(j.ws()), one(ref(members)), lit("}")))
	}))
}

// array is a JSON array whose items match v, lo to hi of them (hi < 0: no
// bound).
func (j jsonRules) arrayOf(v sym, lo, hi int) sym {
	return ref(j.b.memoRule(fmt.Sprintf("array(%d){%d,%d}", v.ref, lo, hi), func() int {
		b := j.b
		items := b.repeat(fmt.Sprintf("items(%d){%d,%d}", v.ref, lo, hi), seq(one(v), one(j.ws())), seq(lit(","), one(j.ws())), lo, hi)
		return b.rule(fmt.Sprintf("array(%d){%d,%d}", v.ref, lo, hi), seq(lit("["), one(j.ws()), one(ref(items)), lit("]")))
	}))
}

func (j jsonRules) array(v sym) sym { return j.arrayOf(v, 0, -1) }

// jsonObject is the one grammar JSONObject returns, so that its mask
// cache serves every request.
var jsonObject = sync.OnceValue(buildJSONObject)

// JSONObject returns the grammar of any JSON object: what OpenAI's response_format {"type": "json_object"}
// promises. Every call returns the same grammar (and its mask cache).
func JSONObject() *Grammar { return jsonObject() }

func buildJSONObject() *Grammar {
	b := newBuilder()
	j := jsonRules{b}
	root := b.rule("root", one(j.object(j.value())))
	g, err := b.compile(root)
	if err != nil {
		panic(err) // a fixed grammar
	}
	return g
}

// JSONValue returns the grammar of any JSON value.
func JSONValue() *Grammar {
	b := newBuilder()
	j := jsonRules{b}
	root := b.rule("root", one(j.value()))
	g, err := b.compile(root)
	if err != nil {
		panic(err)
	}
	return g
}
