// Package oai is the small OpenAI-API client the tools share
// (tools/loadtest, tools/servebench): requests with the optional bearer
// key, the first model GET /v1/models lists, and the server-sent event
// stream of a streamed completion.
package oai

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Client talks to one server.
type Client struct {
	URL  string // base URL, without the trailing slash
	Key  string // bearer token; empty: none
	HTTP *http.Client
}

// New returns a client of the server at url (a trailing slash is dropped).
func New(url, key string, hc *http.Client) *Client {
	return &Client{URL: strings.TrimRight(url, "/"), Key: key, HTTP: hc}
}

// Do sends method path with body (JSON when not nil) and the key.
func (c *Client) Do(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.URL+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Key != "" {
		req.Header.Set("Authorization", "Bearer "+c.Key)
	}
	return c.HTTP.Do(req)
}

// ModelID returns the first model GET /v1/models lists.
func (c *Client) ModelID(ctx context.Context) (string, error) {
	resp, err := c.Do(ctx, http.MethodGet, "/v1/models", nil)
	if err != nil {
		return "", fmt.Errorf("GET /v1/models: %w", err)
	}
	defer resp.Body.Close()
	var out struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.Data) == 0 {
		return "", fmt.Errorf("GET /v1/models (HTTP %d) lists no model (%v)", resp.StatusCode, err)
	}
	return out.Data[0].ID, nil
}

// Choice is one choice of a completion or chat completion, whole or one
// streamed chunk of it; Content gives its text whichever it is.
type Choice struct {
	Text    string `json:"text"`
	Message struct {
		Content string `json:"content"`
	} `json:"message"`
	Delta struct {
		Content string `json:"content"`
	} `json:"delta"`
}

// Content is the choice's text: a completion's text, a chat message's or a
// chat chunk's delta.
func (ch Choice) Content() string { return ch.Text + ch.Message.Content + ch.Delta.Content }

// Event is one event of a completion stream.
type Event struct {
	Choices []Choice `json:"choices"`
	Usage   *struct {
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// ErrNoDone is the error of a stream that ended without its [DONE] event.
var ErrNoDone = errors.New("stream ended without [DONE]")

// maxEvent is the longest event line a stream may carry.
const maxEvent = 4 << 20

// Stream reads a completion stream's events from r and calls fn with each
// until [DONE] (then it returns nil) or until fn returns stop (nil too). An
// error event, a malformed event or a stream that ends first (ErrNoDone,
// wrapped with the reader's error if any) is an error.
func Stream(r io.Reader, fn func(ev *Event) (stop bool)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxEvent)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if line == "[DONE]" {
			return nil
		}
		var ev Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			return fmt.Errorf("bad stream event %.120q: %w", line, err)
		}
		if ev.Error != nil {
			return fmt.Errorf("server error in stream: %s", ev.Error.Message)
		}
		if fn(&ev) {
			return nil
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrNoDone, err)
	}
	return ErrNoDone
}
