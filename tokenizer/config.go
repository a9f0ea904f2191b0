package tokenizer

import (
	"sort"
	"strconv"
)

// tokenizerConfig is what this package reads from tokenizer_config.json.
type tokenizerConfig struct {
	bosToken, eosToken, unkToken, padToken string
	sepToken, clsToken, maskToken          string // passed to chat templates only
	addBOS, addEOS                         bool
	hasAddBOS, hasAddEOS                   bool              // the keys are present
	chatTemplate                           string            // the default (or only) template
	chatTemplates                          map[string]string // named templates, when chat_template is a list
	addedTokens                            []AddedToken      // added_tokens_decoder
}

// generationConfig is what this package reads from generation_config.json.
type generationConfig struct {
	bos int   // -1 when absent
	eos []int // eos_token_id, an int or a list
}

// specialTokenField reads "bos_token" and friends: a string, an AddedToken
// object {"content": ...}, or null.
func specialTokenField(n jnode) (string, error) {
	if n.isNull() {
		return "", nil
	}
	if len(n.raw) > 0 && n.raw[0] == '{' {
		o, err := n.object()
		if err != nil {
			return "", err
		}
		return o.get("content").str()
	}
	return n.str()
}

func parseTokenizerConfig(data []byte) (tokenizerConfig, error) {
	var c tokenizerConfig
	o, err := rootNode(TokenizerConfigFile, data).object()
	if err != nil {
		return c, err
	}
	if c.bosToken, err = specialTokenField(o.get("bos_token")); err != nil {
		return c, err
	}
	if c.eosToken, err = specialTokenField(o.get("eos_token")); err != nil {
		return c, err
	}
	if c.unkToken, err = specialTokenField(o.get("unk_token")); err != nil {
		return c, err
	}
	if c.padToken, err = specialTokenField(o.get("pad_token")); err != nil {
		return c, err
	}
	if c.sepToken, err = specialTokenField(o.get("sep_token")); err != nil {
		return c, err
	}
	if c.clsToken, err = specialTokenField(o.get("cls_token")); err != nil {
		return c, err
	}
	if c.maskToken, err = specialTokenField(o.get("mask_token")); err != nil {
		return c, err
	}
	c.hasAddBOS, c.hasAddEOS = o.has("add_bos_token"), o.has("add_eos_token")
	if c.addBOS, err = o.get("add_bos_token").boolOr(false); err != nil {
		return c, err
	}
	if c.addEOS, err = o.get("add_eos_token").boolOr(false); err != nil {
		return c, err
	}
	if tn := o.get("chat_template"); !tn.isNull() {
		if len(tn.raw) > 0 && tn.raw[0] == '[' {
			// A list of named templates: "default" is the one used
			// without tools, "tool_use" the one used with tools (HF).
			c.chatTemplates = map[string]string{}
			list, err := tn.array()
			if err != nil {
				return c, err
			}
			for i, e := range list {
				eo, err := e.object()
				if err != nil {
					return c, err
				}
				name, err := eo.get("name").strOr("")
				if err != nil {
					return c, err
				}
				tmpl, err := eo.get("template").str()
				if err != nil {
					return c, err
				}
				if name != "" {
					c.chatTemplates[name] = tmpl
				}
				if i == 0 || name == "default" {
					c.chatTemplate = tmpl
				}
			}
		} else if c.chatTemplate, err = tn.str(); err != nil {
			return c, err
		}
	}
	if dn := o.get("added_tokens_decoder"); !dn.isNull() {
		do, err := dn.object()
		if err != nil {
			return c, err
		}
		for key := range do.m {
			kn := do.get(key)
			id, err := strconv.Atoi(key)
			if err != nil || id < 0 || id > maxTokenID {
				return c, kn.errorf("key %q is not a token id", key)
			}
			at, err := parseAddedToken(kn, false)
			if err != nil {
				return c, err
			}
			at.ID = id
			c.addedTokens = append(c.addedTokens, at)
		}
		sortAddedByID(c.addedTokens)
	}
	return c, nil
}

func sortAddedByID(a []AddedToken) {
	sort.Slice(a, func(i, j int) bool { return a[i].ID < a[j].ID })
}

func parseGenerationConfig(data []byte) (generationConfig, error) {
	g := generationConfig{bos: -1}
	o, err := rootNode(GenerationConfigFile, data).object()
	if err != nil {
		return g, err
	}
	if n := o.get("bos_token_id"); !n.isNull() {
		if g.bos, err = n.integer(maxTokenID); err != nil {
			return g, err
		}
	}
	if n := o.get("eos_token_id"); !n.isNull() {
		if len(n.raw) > 0 && n.raw[0] == '[' {
			list, err := n.array()
			if err != nil {
				return g, err
			}
			for _, e := range list {
				id, err := e.integer(maxTokenID)
				if err != nil {
					return g, err
				}
				g.eos = append(g.eos, id)
			}
		} else {
			id, err := n.integer(maxTokenID)
			if err != nil {
				return g, err
			}
			g.eos = []int{id}
		}
	}
	return g, nil
}
