package tokenizer

import (
	"strings"
)

// postProcessor is what HF's post-processors do to the ids of one sequence:
// tokens before and after it. TemplateProcessing, RobertaProcessing and
// BertProcessing reduce to that; ByteLevel only adjusts offsets, which this
// package does not track.
type postProcessor struct {
	pre, post []int32
}

// parsePostProcessor decodes the "post_processor" field (non-null). Pair
// templates are not used: Encode takes one sequence.
func parsePostProcessor(n jnode, depth int, t *Tokenizer) (postProcessor, error) {
	var pp postProcessor
	if depth > maxNesting {
		return pp, n.errorf("nested more than %d deep", maxNesting)
	}
	o, err := n.object()
	if err != nil {
		return pp, err
	}
	typ, err := o.typeName()
	if err != nil {
		return pp, err
	}
	switch typ {
	case "ByteLevel":
		return pp, nil
	case "TemplateProcessing":
		return parseTemplate(o)
	case "RobertaProcessing", "BertProcessing":
		cls, err := tokenPair(o.get("cls"))
		if err != nil {
			return pp, err
		}
		sep, err := tokenPair(o.get("sep"))
		if err != nil {
			return pp, err
		}
		return postProcessor{pre: []int32{cls}, post: []int32{sep}}, nil
	case "Sequence":
		list, err := o.get("processors").array()
		if err != nil {
			return pp, err
		}
		// Each processor wraps the result of the previous one.
		for _, e := range list {
			q, err := parsePostProcessor(e, depth+1, t)
			if err != nil {
				return pp, err
			}
			pp.pre = append(append([]int32(nil), q.pre...), pp.pre...)
			pp.post = append(pp.post, q.post...)
		}
		return pp, nil
	}
	return pp, o.get("type").wrap(unsupported("post_processor", typ,
		"TemplateProcessing, ByteLevel, RobertaProcessing, BertProcessing, Sequence"))
}

// tokenPair decodes ["<s>", 0].
func tokenPair(n jnode) (int32, error) {
	a, err := n.array()
	if err != nil {
		return 0, err
	}
	if len(a) != 2 {
		return 0, n.errorf("want [token, id], got %d elements", len(a))
	}
	if _, err := a[0].str(); err != nil {
		return 0, err
	}
	id, err := a[1].integer(maxTokenID)
	return int32(id), err
}

// parseTemplate decodes TemplateProcessing's "single" template and its
// special_tokens table.
func parseTemplate(o jobject) (postProcessor, error) {
	var pp postProcessor
	specials := map[string][]int32{}
	if sn := o.get("special_tokens"); !sn.isNull() {
		so, err := sn.object()
		if err != nil {
			return pp, err
		}
		for name := range so.m {
			eo, err := so.get(name).object()
			if err != nil {
				return pp, err
			}
			list, err := eo.get("ids").array()
			if err != nil {
				return pp, err
			}
			ids := make([]int32, 0, len(list))
			for _, e := range list {
				id, err := e.integer(maxTokenID)
				if err != nil {
					return pp, err
				}
				ids = append(ids, int32(id))
			}
			specials[name] = ids
		}
	}

	sn := o.get("single")
	type item struct {
		special string // name in special_tokens, or "" for a sequence
		seq     string // "A" or "B"
		node    jnode
	}
	var items []item
	if s, err := sn.str(); err == nil {
		// String form: "<s>:0 $A:0 </s>:0".
		for _, w := range strings.Fields(s) {
			name := w
			if i := strings.LastIndexByte(w, ':'); i > 0 {
				name = w[:i]
			}
			if strings.HasPrefix(name, "$") {
				seq := strings.TrimPrefix(name, "$")
				if seq == "" || seq == "0" {
					seq = "A"
				} else if seq == "1" {
					seq = "B"
				}
				items = append(items, item{seq: seq, node: sn})
			} else {
				items = append(items, item{special: name, node: sn})
			}
		}
	} else {
		list, err := sn.array()
		if err != nil {
			return pp, err
		}
		for _, e := range list {
			eo, err := e.object()
			if err != nil {
				return pp, err
			}
			switch {
			case eo.has("SpecialToken"):
				so, err := eo.get("SpecialToken").object()
				if err != nil {
					return pp, err
				}
				name, err := so.get("id").str()
				if err != nil {
					return pp, err
				}
				items = append(items, item{special: name, node: so.get("id")})
			case eo.has("Sequence"):
				so, err := eo.get("Sequence").object()
				if err != nil {
					return pp, err
				}
				seq, err := so.get("id").str()
				if err != nil {
					return pp, err
				}
				items = append(items, item{seq: seq, node: so.get("id")})
			default:
				return pp, e.errorf(`want {"SpecialToken": ...} or {"Sequence": ...}`)
			}
		}
	}
	seenA := false
	for _, it := range items {
		if it.special == "" {
			if it.seq != "A" || seenA {
				return pp, it.node.errorf("single template must use sequence A exactly once, got %q", it.seq)
			}
			seenA = true
			continue
		}
		ids, ok := specials[it.special]
		if !ok {
			return pp, it.node.errorf("special token %q is not in special_tokens", it.special)
		}
		if seenA {
			pp.post = append(pp.post, ids...)
		} else {
			pp.pre = append(pp.pre, ids...)
		}
	}
	if !seenA {
		return pp, sn.errorf("single template does not use sequence A")
	}
	return pp, nil
}
