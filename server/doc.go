// Package server is bitdecode's OpenAI-compatible HTTP API over an
// engine.Scheduler: POST /v1/chat/completions and /v1/completions
// (streaming over server-sent events exactly as OpenAI streams, or whole),
// POST /v1/responses (OpenAI's Responses API, served as the equivalent chat
// request: responses.go), GET /v1/models, /health and /metrics (Prometheus
// text format). It uses net/http only.
//
// Requests are validated as OpenAI validates them and refused with OpenAI
// error objects ({"error": {"message", "type", "param", "code"}}): 400 for
// invalid or unsupported parameters and for prompts that do not fit the
// context (the message names the numbers), 404 for an unknown model, 413
// for a body over the size limit, 429 when the scheduler's queue is full,
// 503 while shutting down. A client that disconnects cancels its request:
// the scheduler frees the sequence's KV blocks at its next step.
//
// Two non-standard request fields are accepted (OpenAI clients send them
// with extra_body; other unknown fields are ignored, as before):
// "ignore_eos" (vLLM's) and "kv_tiers", bitdecode's extension for a server
// whose KV cache is bw (read-time precision tiers): the request's own tier
// policy over the same stored planes, in the policy syntax of a bw spec
// ("h20:m40:l40", "m100:w0:s0"; see kv.ParsePlanePolicy). An invalid
// policy, or kv_tiers on a server whose cache is not bw, is a 400 with
// param "kv_tiers". For a bw cache /metrics adds the tokens read per tier,
// the plane bytes read against fp16's and the current tier mix.
//
// docs/serving.md describes the endpoints, the metrics and the behaviour
// under overload for users.
package server
