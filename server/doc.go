// Package server is bitdecode's OpenAI-compatible HTTP API over an
// engine.Scheduler: POST /v1/chat/completions and /v1/completions
// (streaming over server-sent events exactly as OpenAI streams, or whole),
// GET /v1/models, /health and /metrics (Prometheus text format). It uses
// net/http only.
//
// Requests are validated as OpenAI validates them and refused with OpenAI
// error objects ({"error": {"message", "type", "param", "code"}}): 400 for
// invalid or unsupported parameters and for prompts that do not fit the
// context (the message names the numbers), 404 for an unknown model, 413
// for a body over the size limit, 429 when the scheduler's queue is full,
// 503 while shutting down. A client that disconnects cancels its request:
// the scheduler frees the sequence's KV blocks at its next step.
//
// docs/serving.md describes the endpoints, the metrics and the behaviour
// under overload for users.
package server
