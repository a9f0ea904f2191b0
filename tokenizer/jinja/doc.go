// Package jinja is a Jinja2 interpreter for chat templates: it renders the
// templates of Hugging Face checkpoints exactly as transformers'
// apply_chat_template does.
//
// # What is rendered as transformers does
//
// Compile applies transformers' environment: trim_blocks and lstrip_blocks,
// one trailing newline dropped (keep_trailing_newline=False), "\r\n" read as
// "\n", the loop controls {% break %} and {% continue %}, and
// {% generation %} (transformers' assistant tracker) rendering its body.
// Render provides jinja2's default Undefined (printed as "", false, empty
// when iterated, an error when its attributes are read), HF's tojson
// (json.dumps with ensure_ascii=False, indent, separators, sort_keys; key
// order kept), raise_exception (an *Error with Raised set), strftime_now,
// namespace, range, dict, and the sandbox's refusal of list and dict
// mutation (append, update...).
//
// The language: {{ }}, {% if/elif/else %}, {% for %} with unpacking, an if
// filter, else and the loop variable (index, index0, revindex, first, last,
// length, previtem, nextitem, cycle), {% set %} (names, tuples, namespace
// attributes, blocks), {% macro %} with defaults, varargs and kwargs,
// {% call %}, {% filter %}, {% raw %}, comments and whitespace control
// ({%- -%}, {%+ +%}). Expressions have Python's semantics and precedence as
// jinja2 parses them: and/or/not, chained comparisons, in, is tests, ~,
// arithmetic with Python's floor division and modulo, conditional
// expressions, literals (tuples, lists, dicts with hashable keys), slices,
// attribute and item lookup in jinja2's order (a dict's methods before its
// keys for ".", keys first for "[]"), filters and method calls. Values print
// as Python's str(): None, True, 1.0, 1e+16, ['a', 1], {'k': None}.
//
// Filters: trim, tojson, length/count, upper, lower, capitalize, title,
// replace, items, default/d, join, string, first, last, list, reverse, map,
// select, reject, selectattr, rejectattr, unique, sort, dictsort, int,
// float, abs, round, sum, min, max, indent, safe, escape, wordcount, format,
// center. Tests: defined, undefined, none, boolean, true, false, integer,
// float, number, string, mapping, iterable, sequence, callable, odd, even,
// divisibleby, eq/ne/lt/le/gt/ge (and their symbols), in, sameas, lower,
// upper. Methods of str (strip, split, startswith, replace, format, ...),
// dict (items, keys, values, get) and list (index, count). Anything else is
// an error naming the template line, never silently ignored: {% include %},
// {% extends %} and recursive loops are not supported (chat templates are
// single files).
//
// The testdata's constructs.json holds one template per construct with
// what transformers 5.17 / jinja2 3.1.6 render (tools/chatcheck), and the
// tests hold the interpreter to it.
//
// # Limits
//
// A template comes with the checkpoint, so it is not trusted: Limits bound
// the output, the steps (statements, loop iterations, operations, and the
// work of operations on large values), and macro recursion;
// parsing bounds nesting; values built from shared items are bounded when
// printed, serialized or compared. Exceeding a limit is an *Error.
package jinja
