package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/bitdecode/bitdecode/engine"
)

// requestLine is one generation request in the request log.
type requestLine struct {
	Time             string  `json:"time"`
	ID               string  `json:"id"`
	Endpoint         string  `json:"endpoint"`
	Choices          int     `json:"choices"`
	Stream           bool    `json:"stream"`
	PromptTokens     int     `json:"prompt_tokens"`
	CachedTokens     int     `json:"cached_tokens"`
	CompletionTokens int     `json:"completion_tokens"`
	QueueMS          float64 `json:"queue_ms"`
	TTFTMS           float64 `json:"ttft_ms"`
	DurationMS       float64 `json:"duration_ms"`
	DecodeTPS        float64 `json:"decode_tokens_per_s"`
	Preemptions      int     `json:"preemptions"`
	Finish           string  `json:"finish_reason"`
	Error            string  `json:"error,omitempty"`
}

// logRequest writes the request log's line for a request that has ended:
// finished, failed, or left by its client (choices still unfinished then
// log finish_reason "cancelled").
func (s *Server) logRequest(id string, j *job, results []engine.Result, start time.Time) {
	if s.cfg.RequestLog == nil {
		return
	}
	l := requestLine{Time: start.UTC().Format(time.RFC3339Nano), ID: id, Endpoint: "completions", Choices: len(results), Stream: j.stream,
		DurationMS: ms(time.Since(start))}
	if j.chat {
		l.Endpoint = "chat"
	}
	if j.endpoint != "" {
		l.Endpoint = j.endpoint
	}
	var finish []string
	var decode time.Duration
	for i, r := range results {
		if i == 0 {
			l.PromptTokens, l.CachedTokens, l.QueueMS, l.TTFTMS = r.PromptTokens, r.CachedTokens, ms(r.Queued), ms(r.TTFT)
		}
		l.CompletionTokens += r.CompletionTokens
		l.Preemptions += r.Preemptions
		decode = max(decode, r.Decode)
		f := r.FinishReason
		if f == "" {
			// Still running when the request ended: its client left, and
			// the scheduler is cancelling it.
			f = engine.FinishCancelled
		}
		finish = append(finish, f)
		if r.Err != nil && l.Error == "" {
			l.Error = r.Err.Error()
		}
	}
	if decode > 0 {
		l.DecodeTPS = float64(l.CompletionTokens-len(results)) / decode.Seconds()
	}
	l.Finish = strings.Join(finish, ",")
	var line string
	if s.cfg.LogJSON {
		b, _ := json.Marshal(l)
		line = string(b)
	} else {
		line = fmt.Sprintf("%s %s %s choices=%d stream=%v prompt=%d cached=%d completion=%d queue=%.1fms ttft=%.1fms total=%.1fms decode=%.1ftok/s preempted=%d finish=%s",
			l.Time, l.ID, l.Endpoint, l.Choices, l.Stream, l.PromptTokens, l.CachedTokens, l.CompletionTokens, l.QueueMS, l.TTFTMS, l.DurationMS, l.DecodeTPS, l.Preemptions, l.Finish)
		if l.Error != "" {
			line += fmt.Sprintf(" error=%q", l.Error)
		}
	}
	s.logMu.Lock()
	fmt.Fprintln(s.cfg.RequestLog, line)
	s.logMu.Unlock()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
