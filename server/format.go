package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"sync"

	"github.com/bitdecode/bitdecode/constrain"
)

// maxGrammars bounds the compiled schemas the server keeps: a client that
// sends the same schema again reuses its grammar and the token masks
// cached in it (at most constrain.MaxCacheBytes each: 128 MiB in all).
const maxGrammars = 16

// grammarCache holds compiled schemas by their compact text and strictness.
type grammarCache struct {
	mu sync.Mutex
	by map[string]*constrain.Grammar
}

// get returns the grammar of schema, compiling it the first time.
func (c *grammarCache) get(schema []byte, strict bool) (*constrain.Grammar, error) {
	var key bytes.Buffer
	if strict {
		key.WriteByte('s')
	} else {
		key.WriteByte('n')
	}
	if err := json.Compact(&key, schema); err != nil {
		return nil, &constrain.SchemaError{Msg: "not valid JSON: " + err.Error()}
	}
	c.mu.Lock()
	g := c.by[key.String()]
	c.mu.Unlock()
	if g != nil {
		return g, nil
	}
	g, err := constrain.JSONSchema(schema, constrain.SchemaOptions{Strict: strict})
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.by == nil || len(c.by) >= maxGrammars {
		c.by = map[string]*constrain.Grammar{}
	}
	c.by[key.String()] = g
	c.mu.Unlock()
	return g, nil
}

// parseFormat returns the grammar the request's output must match: nil for
// text, any JSON object for json_object, the schema's documents for
// json_schema (strict makes every property required, as OpenAI's strict
// mode) and for llama.cpp's json_schema field. Invalid schemas and
// keywords that constrained decoding does not enforce are 400s naming the
// field.
func (s *Server) parseFormat(c *commonRequest) (*constrain.Grammar, *apiError) {
	rf := c.ResponseFormat
	llama := len(bytes.TrimSpace(c.JSONSchema)) > 0 && string(bytes.TrimSpace(c.JSONSchema)) != "null"
	if rf != nil && rf.Type != "" && rf.Type != "text" && llama {
		return nil, invalid("json_schema", "", "Give either 'response_format' or 'json_schema', not both.")
	}
	if llama {
		return s.compileSchema(c.JSONSchema, false, "json_schema", "")
	}
	if rf == nil {
		return nil, nil
	}
	switch rf.Type {
	case "", "text":
		return nil, nil
	case "json_object":
		return constrain.JSONObject(), nil
	case "json_schema":
		js := rf.JSONSchema
		if js == nil {
			return nil, invalid("response_format.json_schema", "missing_required_parameter", "Missing required parameter: 'response_format.json_schema'.")
		}
		if raw := bytes.TrimSpace(js.Schema); len(raw) == 0 || string(raw) == "null" {
			return nil, invalid("response_format.json_schema.schema", "missing_required_parameter", "Missing required parameter: 'response_format.json_schema.schema'.")
		}
		strict := js.Strict != nil && *js.Strict
		return s.compileSchema(js.Schema, strict, "response_format.json_schema.schema", js.Name)
	}
	return nil, invalid("response_format.type", "invalid_value", "Invalid value for 'response_format.type': '%s'. Supported values are: 'text', 'json_object' and 'json_schema'.", rf.Type)
}

// compileSchema compiles a schema, its errors as 400s for param.
func (s *Server) compileSchema(schema json.RawMessage, strict bool, param, name string) (*constrain.Grammar, *apiError) {
	g, err := s.grammars.get(schema, strict)
	if err != nil {
		return nil, schemaError(err, param, name)
	}
	return g, nil
}

// schemaError is a schema's compile error as a 400 for param (name: the
// response_format's name, or "").
func schemaError(err error, param, name string) *apiError {
	what := "schema"
	if name != "" {
		what = "schema for response_format '" + name + "'"
	}
	var se *constrain.SchemaError
	if errors.As(err, &se) && se.Unsupported {
		return invalid(param, "unsupported_schema_keyword", "Unsupported %s: %v. Constrained decoding refuses what it cannot enforce rather than ignore it.", what, strings.TrimPrefix(se.Error(), "the schema: "))
	}
	return invalid(param, "invalid_schema", "Invalid %s: %v.", what, strings.TrimPrefix(err.Error(), "the schema: "))
}
