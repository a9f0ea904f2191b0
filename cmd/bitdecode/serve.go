package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/bitdecode/bitdecode/engine"
	"github.com/bitdecode/bitdecode/kvcache"
	"github.com/bitdecode/bitdecode/model"
	"github.com/bitdecode/bitdecode/server"
)

var serveCmd = &command{
	name:    "serve",
	usage:   "[--model DIR] [--kv SPEC] [--weights SPEC [--calib FILE] [--dec-k K|tuned:P%|NAME:K,...]] [--device auto|cpu|cuda] [--tp N] [--addr HOST:PORT] [--kv-memory SIZE] [--max-seqs N]",
	summary: "OpenAI-compatible HTTP server with continuous batching over a paged low-bit KV cache",
	help: `Loads the checkpoint in DIR (without --model: the embedded default
model, model/gotiny; --model org/name takes a Hugging Face Hub repository,
served under that name) and serves the OpenAI API on --addr:
POST /v1/chat/completions and /v1/completions (streaming or not; a
completion's prompt may be a batch, and echo with logprobs scores the
prompt, as evaluation harnesses ask), POST /v1/responses (OpenAI's
Responses API, served as the equivalent chat request; nothing is stored,
so GET /v1/responses/{id} answers 404), GET /v1/models, /health and
/metrics (Prometheus). Every request's KV cache lives
in a shared pool of --kv-memory bytes, cut into blocks of the format's
residual size (128 tokens for int4); up to --max-seqs sequences run in one
batch, each step decoding one token of every running sequence plus at most
--prefill-chunk prompt tokens of one new request. Requests that do not fit
wait in a queue (--max-queue; beyond it the server answers 429); when the
pool runs out, the youngest sequence is preempted and recomputed later.
Identical prompt prefixes share their packed blocks (on the GPU in whole
prefill chunks that were computed alone, so that sharing never changes a
request's bits; docs/serving.md). response_format {"type": "json_object"}
or {"type": "json_schema", ...} (and llama.cpp's "json_schema" field)
constrains decoding so that the output is JSON matching the schema;
schema keywords it cannot enforce are refused with a 400 (docs/serving.md,
"Structured output"). Chat requests with "tools" render them through the
checkpoint's chat template and return the model's calls as "tool_calls";
tool_choice "required" or a named function constrains the answer to a call
(docs/serving.md, "Tool calling"). SIGINT or
SIGTERM stops accepting requests and lets running streams finish for up to
--drain.

With --device cuda (auto picks it when a GPU is present) the model and the
paged KV cache live on the GPU (kvcache/gpukv: tensor-core decode over the
packed blocks, decode steps replayed as CUDA graphs). docs/serving.md has
the details and client examples. There, --batch-invariant (on by default)
makes a request's results independent of the batch it runs in: every fp16
linear layer runs the batch-invariant tensor-core kernel and the cache
splits decode attention the same way for any batch, so greedy text is the
same alone and under load; --batch-invariant=false trades that for the
throughput of cuBLASLt on prefill chunks (docs/serving.md gives the cost).

--weights int8|int4|int3 (with :gptq and --calib, --dec-k, as for 'run')
quantizes the linear layers at load; on the CPU a request's results stay the
same alone and under load, on the GPU low-bit weights need
--batch-invariant=false (their kernels round differently by batch size).

--kv bw... (fp16 KV stored as bit planes, read at 16/8/4 bits per token by
importance; docs/bitweaver.md) is served on the CPU and on the GPU from a
pool of blocks of the spec's blkN tokens, without prefix sharing; a request
may choose its own tier mix with the extension field "kv_tiers" (e.g.
"h20:m40:l40"), and /metrics reports the bytes read per tier. On the GPU,
--kv-memory also holds every sequence's attention mass (4 bytes per token
of --ctx-size, layer and KV head, for --max-seqs sequences): set --ctx-size.

` + tpHelp + ` With --tp N, --kv-memory is each GPU's KV memory:
every GPU holds the same blocks of its own KV heads, so N GPUs hold N times
the tokens' bytes and admit the same requests as one GPU with N times the
memory would.

Security: bound to 127.0.0.1 (the default --addr) the server answers only
Host names of this machine (DNS rebinding), refuses requests from web pages
(an Origin header not in --cors-origins) and POST bodies that are not
JSON (a cross-site form or text/plain fetch), so a browser cannot be made to
use it. --api-key KEY (or $BITDECODE_API_KEY) requires "Authorization: Bearer
KEY" on the API, and on /health and /metrics with --api-key-all. Listening on
another address, set --api-key and --allowed-hosts. A request's body must
arrive within --body-timeout, idle connections close after --idle-timeout,
and a client that stops reading is dropped after --write-timeout. Each
request gets one log line on stderr (--log-format json for JSON lines).

examples:
  bitdecode serve --model ../shared/models/gocoder-23m --kv int4 --kv-memory 1GiB
  bitdecode serve --device cpu --kv bw:h20:m40:l40
  bitdecode serve --device cuda --kv bw:h20:m40:l40 --ctx-size 4096
  bitdecode serve --model DIR --device cuda --tp 2 --kv int4 --kv-memory 20GiB
  curl -s localhost:8080/v1/completions -H 'Content-Type: application/json' \
    -d '{"model":"gocoder-23m","prompt":"func main() {","max_tokens":32}'`,
}

type serveFlags struct {
	weightFlags
	modelDir, kvSpec, device, addr, kvMemory, name, maxBody *string
	apiKey, allowedHosts, corsOrigins, logFormat            *string
	chatTemplate                                            *string
	maxSeqs, chunk, maxQueue, ctx, tp                       *int
	drain, bodyTimeout, idleTimeout, writeTimeout           *time.Duration
	quiet, authAll, noRequestLog, batchInvariant            *bool
}

func addServeFlags(fs *flag.FlagSet) serveFlags {
	return serveFlags{
		weightFlags:    addWeightFlags(fs),
		modelDir:       fs.String("model", "", modelHelp),
		kvSpec:         fs.String("kv", "int4", "KV cache format spec ('bitdecode inspect kv' explains them)"),
		device:         fs.String("device", "auto", "auto, cpu or cuda"),
		tp:             addTPFlag(fs),
		addr:           fs.String("addr", "127.0.0.1:8080", "listen address, HOST:PORT"),
		kvMemory:       fs.String("kv-memory", "1GiB", "memory of the KV cache: residual blocks of --max-seqs sequences plus the block pool (bytes, or with KiB/MiB/GiB/KB/MB/GB)"),
		name:           fs.String("served-model-name", "", "model id clients send and /v1/models lists (default: the base name of DIR)"),
		chatTemplate:   fs.String("chat-template", "", chatTemplateHelp),
		maxBody:        fs.String("max-body", "4MiB", "largest request body (bytes or with a unit); larger ones get 413"),
		maxSeqs:        fs.Int("max-seqs", 32, "sequences running in one batch at most"),
		chunk:          fs.Int("prefill-chunk", 256, "prompt tokens prefilled per step at most (rounded up to whole KV blocks)"),
		maxQueue:       fs.Int("max-queue", 1024, "requests waiting at most; beyond it new requests get 429"),
		ctx:            fs.Int("ctx-size", 0, "cap a request's context (prompt plus completion), in tokens; on the GPU it also sizes the block tables (0: the model's context)"),
		drain:          fs.Duration("drain", 30*time.Second, "on SIGINT/SIGTERM, how long running streams may finish"),
		quiet:          fs.Bool("quiet", false, "no progress bar or log lines on stderr"),
		apiKey:         fs.String("api-key", "", "require 'Authorization: Bearer KEY' on the API (default: $"+envAPIKey+"; empty: no auth)"),
		authAll:        fs.Bool("api-key-all", false, "with --api-key, require it on /health and /metrics too"),
		allowedHosts:   fs.String("allowed-hosts", "", "comma-separated Host names the server answers (a defense against DNS rebinding; default: localhost, 127.0.0.1 and ::1 when --addr is a loopback address, any otherwise; * for any)"),
		corsOrigins:    fs.String("cors-origins", "", "comma-separated browser origins allowed to call the API, with CORS headers (* for any; default: none, so a web page cannot use the server through a visitor's browser)"),
		logFormat:      fs.String("log-format", "text", "request log format on stderr: text or json"),
		noRequestLog:   fs.Bool("no-request-log", false, "no log line per request"),
		batchInvariant: fs.Bool("batch-invariant", true, "a request's results the same whatever runs beside it (the GPU's batch-invariant linear kernel and fixed attention splits; false: cuBLASLt for prefill chunks, faster)"),
		bodyTimeout:    fs.Duration("body-timeout", server.DefaultBodyTimeout, "how long a request's headers and body may take to arrive"),
		idleTimeout:    fs.Duration("idle-timeout", server.DefaultIdleTimeout, "how long an idle keep-alive connection stays open"),
		writeTimeout:   fs.Duration("write-timeout", server.DefaultWriteTimeout, "how long one write of a response (a whole response, or one event of a stream) may take"),
	}
}

func init() {
	flagSets["serve"] = func() *flag.FlagSet {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		addServeFlags(fs)
		return fs
	}
	serveCmd.run = runServe
	register(serveCmd)
}

// serveContext is the context that ends the server: SIGINT or SIGTERM
// (tests replace it).
var serveContext = func() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

func runServe(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet(serveCmd, stdout)
	f := addServeFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	repo, err := resolveModel(f.modelDir, stderr, *f.quiet)
	if err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageErrorf("unexpected arguments %q", fs.Args())
	}
	spec, err := parseSpecChecked(*f.kvSpec)
	if err != nil {
		return err
	}
	if *f.logFormat != "text" && *f.logFormat != "json" {
		return usageErrorf("--log-format %q: want text or json", *f.logFormat)
	}
	if *f.bodyTimeout <= 0 || *f.idleTimeout <= 0 || *f.writeTimeout <= 0 {
		return usageErrorf("--body-timeout, --idle-timeout and --write-timeout must be positive")
	}
	if *f.apiKey == "" {
		*f.apiKey, _ = lookupEnv(envAPIKey)
	}
	if *f.authAll && *f.apiKey == "" {
		return usageErrorf("--api-key-all needs --api-key (or $%s)", envAPIKey)
	}
	hosts, origins := splitList(*f.allowedHosts), splitList(*f.corsOrigins)
	if len(hosts) == 0 && loopbackAddr(*f.addr) {
		hosts = server.LoopbackHosts
	}
	memBytes, err := parseBytes(*f.kvMemory)
	if err != nil {
		return usageErrorf("--kv-memory: %v", err)
	}
	maxBody, err := parseBytes(*f.maxBody)
	if err != nil {
		return usageErrorf("--max-body: %v", err)
	}
	if *f.maxSeqs < 1 || *f.chunk < 1 || *f.maxQueue < 1 {
		return usageErrorf("--max-seqs, --prefill-chunk and --max-queue must be positive")
	}
	name := *f.name
	switch {
	case name == "" && repo != "":
		name = repo // as vLLM names a model served from the Hub
	case name == "" && *f.modelDir != "":
		name = filepath.Base(filepath.Clean(*f.modelDir))
	}
	logw := io.Writer(stderr)
	if *f.quiet {
		logw = io.Discard
	}
	logger := log.New(logw, "bitdecode serve: ", log.LstdFlags)
	o, err := openOptions(*f.modelDir, *f.device, *f.tp, f.weightFlags, stderr, *f.quiet)
	if err != nil {
		return err
	}
	if *f.ctx < 0 {
		return usageErrorf("--ctx-size %d: want a non-negative token count", *f.ctx)
	}
	o.KV, o.Cache = spec, &kvcache.Options{MaxSeqs: *f.maxSeqs, MaxChunk: *f.chunk, MemoryBytes: memBytes, MaxLen: *f.ctx, BatchInvariant: *f.batchInvariant}
	o.BatchInvariant = *f.batchInvariant
	lm, err := engine.Open(*f.modelDir, o)
	if err != nil {
		return err
	}
	defer lm.Close()
	if name == "" {
		name = lm.Name
	}
	if err := useChatTemplate(lm, *f.chatTemplate); err != nil {
		return err
	}
	m, tok, cache := lm.Model, lm.Tokenizer, lm.Cache
	met := server.NewMetrics()
	sched, err := engine.NewScheduler(m, tok, cache, engine.SchedulerOptions{MaxSeqs: *f.maxSeqs, PrefillChunk: *f.chunk, MaxQueue: *f.maxQueue, Context: *f.ctx,
		OnFirstToken: met.ObserveTTFT, OnToken: met.ObserveTokenLatency})
	if err != nil {
		return err
	}
	scfg := server.Config{Scheduler: sched, Tokenizer: tok, ModelName: name, Metrics: met, BlockBytes: cache.BlockBytes(),
		Fingerprint: "bitdecode-" + cache.Format().Spec.String(), MaxBodyBytes: maxBody, Log: logger,
		BodyTimeout: *f.bodyTimeout, IdleTimeout: *f.idleTimeout, WriteTimeout: *f.writeTimeout,
		APIKey: *f.apiKey, AuthAll: *f.authAll, AllowedHosts: hosts, CORSOrigins: origins, LogJSON: *f.logFormat == "json"}
	if !*f.quiet && !*f.noRequestLog {
		scfg.RequestLog = stderr
	}
	srv, err := server.New(scfg)
	if err != nil {
		sched.Close()
		return err
	}
	ln, err := net.Listen("tcp", *f.addr)
	if err != nil {
		sched.Close()
		return fmt.Errorf("%w (is another server on %s? try --addr 127.0.0.1:0)", err, *f.addr)
	}
	cfg := m.Config()
	wm := model.WeightMemoryOf(m)
	logger.Printf("model %s (%s, %d layers, %d/%d heads, head dim %s) on %s, weights %s: %s", name, cfg.Architecture, cfg.Layers, cfg.Heads, cfg.KVHeads, headDim(cfg), lm.Backend.Name(), wm.Format, humanBytes(wm.Bytes))
	if cache.Format().Planes.On {
		p := cache.Format().Planes
		logger.Printf("KV cache %s: %d blocks of %d tokens (%s each: fp16 bit planes, tier maps and attention mass) = %s for up to %d sequences; up to %d tokens per request; tiers h%d/m%d/l%d/e%d%% (requests may set their own with \"kv_tiers\")",
			cache.Format().Spec.String(), cache.TotalBlocks(), cache.BlockTokens(), humanBytes(cache.BlockBytes()),
			humanBytes(int64(cache.TotalBlocks())*cache.BlockBytes()), *f.maxSeqs, sched.ContextLimit(), p.High, p.Medium, p.Low, p.Evicted)
	} else {
		staging, stagingNote := kvcache.StagingBytes(cache), ""
		if staging > 0 {
			stagingNote = fmt.Sprintf(" + %s staging a prefill chunk's blocks", humanBytes(staging))
		}
		logger.Printf("KV cache %s: %d blocks of %d tokens (%s each) + %d residual slots (%s each)%s = %s; up to %d tokens per request",
			cache.Format().Spec.String(), cache.TotalBlocks(), cache.BlockTokens(), humanBytes(cache.BlockBytes()), *f.maxSeqs,
			humanBytes(cache.ResidualBytes()), stagingNote, humanBytes(int64(cache.TotalBlocks())*cache.BlockBytes()+int64(*f.maxSeqs)*cache.ResidualBytes()+staging), sched.ContextLimit())
	}
	if lm.TP > 1 {
		logger.Printf("tensor parallelism over %d ranks: the KV figures above are all ranks together; each rank (GPU) holds the same blocks of its own KV heads in its --kv-memory of %s", lm.TP, humanBytes(memBytes))
	}
	logger.Printf("listening on http://%s (model id %q); SIGINT/SIGTERM drains for up to %v", ln.Addr(), name, *f.drain)
	ctx, stop := serveContext()
	defer stop()
	return srv.Serve(ctx, ln, *f.drain)
}

// parseBytes reads a size: a number of bytes with an optional unit (B, KB,
// MB, GB, TB as powers of 1000; KiB, MiB, GiB, TiB as powers of 1024; case
// insensitive; fractions allowed with a unit).
func parseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	units := []struct {
		suffix string
		mul    float64
	}{{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
		{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12}, {"b", 1}}
	mul := 1.0
	lower := strings.ToLower(t)
	for _, u := range units {
		if strings.HasSuffix(lower, u.suffix) {
			mul, t = u.mul, strings.TrimSpace(t[:len(t)-len(u.suffix)])
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v <= 0 || v*mul >= 1<<62 {
		return 0, fmt.Errorf("%q is not a size (want e.g. 512MiB, 2GiB or 1000000)", s)
	}
	return int64(v * mul), nil
}

// envAPIKey is the environment variable serve reads its API key from when
// --api-key is not given (a flag shows in the process list).
const envAPIKey = "BITDECODE_API_KEY"

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// loopbackAddr reports whether a listen address is on a loopback interface.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
