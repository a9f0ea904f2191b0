package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bitdecode/bitdecode/constrain"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/kvcache"
	"github.com/bitdecode/bitdecode/model"
	"github.com/bitdecode/bitdecode/tokenizer"
)

// Scheduler errors returned by Submit.
var (
	// ErrQueueFull means the wait queue holds MaxQueue requests already.
	ErrQueueFull = errors.New("engine: scheduler queue is full")
	// ErrClosed means the scheduler is shutting down or closed.
	ErrClosed = errors.New("engine: scheduler is closed")
)

// ContextError reports a request that can never fit: its prompt plus
// max tokens exceed the model's context or the whole KV cache.
type ContextError struct {
	PromptTokens int
	MaxTokens    int
	Limit        int    // tokens that fit
	What         string // "the model's context" or "the KV cache"
}

// Error implements error.
func (e *ContextError) Error() string {
	return fmt.Sprintf("engine: %d prompt tokens + %d max tokens = %d exceed %s of %d tokens",
		e.PromptTokens, e.MaxTokens, e.PromptTokens+e.MaxTokens, e.What, e.Limit)
}

// SchedulerOptions configure a Scheduler.
type SchedulerOptions struct {
	// MaxSeqs is the number of sequences running at once (0: the cache's
	// MaxSeqs).
	MaxSeqs int
	// PrefillChunk is the most prompt tokens one step prefills (0: 256). It
	// is rounded up to a whole number of cache blocks, and chunks start at
	// multiples of it, so a prompt is cut the same way whatever runs beside
	// it.
	PrefillChunk int
	// MaxQueue is the number of requests that may wait (0: 1024).
	MaxQueue int
	// Context caps the tokens (prompt plus new) one request may use, below
	// the model's context and the cache's pool (0: no cap of its own).
	Context int
	// OnFirstToken, when set, receives each request's time to first token
	// (from Submit); OnToken the time between later tokens of a request.
	// They run on the scheduler's goroutine and must be quick.
	OnFirstToken, OnToken func(time.Duration)
}

// Request is one generation request.
type Request struct {
	// Prompt holds the token ids, BOS included.
	Prompt []int
	// MaxTokens is the number of new tokens at most (>= 1; 0 only with
	// PromptLogprobs: the prompt is scored and nothing is generated).
	MaxTokens int
	// Sample is the sampling configuration, seed included.
	Sample SampleOptions
	// Stop ends generation at the first occurrence of any of these in the
	// generated text, wherever it falls (inside one token's text too); the
	// text is cut where the stop string begins (at most MaxStops strings of
	// MaxStopBytes bytes).
	Stop []string
	// StopIDs end generation when sampled (not emitted); nil means the
	// tokenizer's stop tokens.
	StopIDs []int
	// KVTiers, when not empty, is the request's own tier policy over a bw
	// cache (one with precision tiers, bw): the policy options of a bw spec, e.g.
	// "h20:m40:l40" or "m100:w0:s0" (kv.ParsePlanePolicy: the options
	// given replace the cache's; storage options are refused). Submit
	// returns a *TiersError when it is invalid or the cache has no tiers.
	KVTiers string
	// PromptLogprobs asks for the log probability of every prompt token
	// after the first, each given the tokens before it, with
	// Sample.TopLogprobs alternatives (Result.PromptLogprobs): what an
	// evaluation harness scores a text with. Such a request shares no cached
	// prefix (every prompt row is computed) and its prefill chunks bring
	// their logits to the host whole.
	PromptLogprobs bool
	// Constraint, when set, restricts the generated text to the documents
	// of a grammar (constrain.JSONObject, constrain.JSONSchema): each step
	// samples among the tokens whose bytes continue a document (the stop
	// tokens only once it is complete; SampleConstrained). The request gets
	// a matcher of its own, so one grammar may serve several requests (n
	// choices share its mask cache). Its rows come to the host whole (the
	// greedy token picked on the device may not be allowed). A document
	// complete with nothing allowed after it but a stop token that the
	// request does not have (StopIDs empty) ends with FinishStop.
	Constraint *constrain.Grammar
}

// ErrConstraint is the error of a request that ends with FinishError because
// its constraint allows no token where the document is not complete (a
// vocabulary that cannot spell what the grammar needs).
var ErrConstraint = errors.New("engine: the constraint allows no token here")

// ErrNoTiers is the reason of a TiersError when the KV cache has no
// precision tiers.
var ErrNoTiers = kvcache.ErrNoTiers

// TiersError reports a Request.KVTiers that cannot be applied.
type TiersError struct {
	KVTiers string // as given
	Err     error  // ErrNoTiers or a *kv.SpecError
}

// Error implements error.
func (e *TiersError) Error() string {
	return fmt.Sprintf("engine: kv tiers %q: %v", e.KVTiers, e.Err)
}

// Unwrap returns the reason.
func (e *TiersError) Unwrap() error { return e.Err }

// Finish reasons of a Result, named as in the OpenAI API where one exists.
const (
	FinishStop      = "stop"      // a stop token or stop string
	FinishLength    = "length"    // max tokens or the model's context
	FinishCancelled = "cancelled" // the request's context ended
	FinishError     = "error"     // the forward pass failed or the scheduler closed
)

// Result describes a finished request.
type Result struct {
	FinishReason     string
	PromptTokens     int
	CompletionTokens int
	// CachedTokens is the number of prompt tokens whose KV blocks were
	// shared with an earlier prompt instead of computed.
	CachedTokens int
	// Preemptions counts how often the request lost its blocks under
	// memory pressure and was recomputed.
	Preemptions int
	Tokens      []int // the generated ids
	// Logprobs holds every generated token's log probabilities when the
	// request asked for them (Sample.Logprobs); a stop token, which is not
	// emitted, is not included.
	Logprobs []SampledToken
	// PromptLogprobs holds, with Request.PromptLogprobs, prompt tokens
	// 1..n-1 with their log probabilities (entry i is token i+1's; the
	// first token has none).
	PromptLogprobs []SampledToken
	// Queued is the time from Submit to the request's first admission,
	// TTFT to its first token, Decode from its first token to its last.
	Queued, TTFT, Decode time.Duration
	Err                  error // set with FinishCancelled and FinishError
}

// Stream delivers a request's text as it is generated.
type Stream struct {
	mu      sync.Mutex
	pending strings.Builder
	tokens  []SampledToken // sampled since the last Next, with Request.Sample.Logprobs
	prompt  []SampledToken // the scored prompt, with Request.PromptLogprobs, until a Next takes it
	done    bool
	res     Result
	notify  chan struct{}
}

// Chunk is what NextChunk returns: the text generated since the previous
// call and, when the request asked for log probabilities, the tokens sampled
// since then (their text may still be held back in part: a stop string's
// possible start, an incomplete UTF-8 sequence).
type Chunk struct {
	Text   string
	Tokens []SampledToken
	// Prompt holds, once, the prompt's log probabilities
	// (Result.PromptLogprobs) of a request with Request.PromptLogprobs: in
	// the first chunk after the prompt is scored, before or with the first
	// generated text.
	Prompt []SampledToken
	// Done reports that the request has finished; Result describes it.
	Done bool
}

func newStream() *Stream { return &Stream{notify: make(chan struct{}, 1)} }

func (s *Stream) push(text string) {
	if text == "" {
		return
	}
	s.mu.Lock()
	s.pending.WriteString(text)
	s.mu.Unlock()
	s.signal()
}

// pushPrompt hands the scored prompt to the next chunk.
func (s *Stream) pushPrompt(p []SampledToken) {
	s.mu.Lock()
	s.prompt = p
	s.mu.Unlock()
	s.signal()
}

// pushToken records a sampled token's log probabilities for the next chunk.
func (s *Stream) pushToken(t SampledToken) {
	s.mu.Lock()
	s.tokens = append(s.tokens, t)
	s.mu.Unlock()
}

func (s *Stream) finish(r Result) {
	s.mu.Lock()
	s.done, s.res = true, r
	s.mu.Unlock()
	s.signal()
}

func (s *Stream) signal() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// Next waits for text or the end of the request and returns the text
// generated since the previous call (complete UTF-8, stop strings held back
// until they cannot match) and whether the request has finished; then
// Result describes it. It returns ctx's error if ctx ends first.
func (s *Stream) Next(ctx context.Context) (text string, done bool, err error) {
	c, err := s.NextChunk(ctx)
	return c.Text, c.Done, err
}

// NextChunk is Next with the sampled tokens' log probabilities.
func (s *Stream) NextChunk(ctx context.Context) (Chunk, error) {
	for {
		s.mu.Lock()
		c := Chunk{Text: s.pending.String(), Tokens: s.tokens, Prompt: s.prompt, Done: s.done}
		s.pending.Reset()
		s.tokens, s.prompt = nil, nil
		s.mu.Unlock()
		if c.Text != "" || len(c.Tokens) > 0 || c.Prompt != nil || c.Done {
			return c, nil
		}
		select {
		case <-s.notify:
		case <-ctx.Done():
			return Chunk{}, ctx.Err()
		}
	}
}

// Result returns the request's result once Next has reported done.
func (s *Stream) Result() Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.res
}

// SchedulerStats is a snapshot of the scheduler for metrics.
type SchedulerStats struct {
	Queued, Running           int
	FreeBlocks, TotalBlocks   int
	PromptTokens              int64 // prompt tokens computed (cached ones excluded)
	CachedTokens              int64 // prompt tokens taken from shared blocks
	GeneratedTokens           int64
	Preemptions               int64
	Steps                     int64
	Finished, Cancelled, Fail int64
	// Tiers describes a cache with precision tiers (bw) after the last
	// step; nil for other caches.
	Tiers *kvcache.TierStats
}

// Scheduler runs continuous batching over a model and a paged KV cache. One
// goroutine owns the model and the cache; each step it feeds one new token
// of every running sequence plus at most one prefill chunk of
// PrefillChunk tokens, so a long prompt stalls the other streams by one
// bounded chunk per step. Requests wait in a FIFO queue and are admitted
// when a sequence slot and the blocks of their prompt are free; when a step
// needs more blocks than are free, the youngest running sequence is
// preempted (its blocks freed, the request requeued at the front and later
// recomputed: its prompt in the same chunks, its generated tokens one per
// step, so it continues with exactly the tokens it would have produced).
// A request whose context ends is removed at the next step and its blocks
// freed.
//
// With greedy sampling a request's text does not depend on what runs beside
// it: the CPU forward computes every row of a batch independently and
// bitwise reproducibly, and the cache sees the same chunk boundaries.
type Scheduler struct {
	m     model.Model
	tok   *tokenizer.Tokenizer
	cache kvcache.Cache
	opts  SchedulerOptions
	limit int // max prompt + new tokens
	// tierSpec is the policy of a cache with tiers (nil for other caches),
	// cacheSpec the cache's format when it tells: noted at start, so that
	// ParseKVTiers never touches the cache.
	tierSpec  *kv.PlaneSpec
	cacheSpec string
	// vocab is the tokenizer's vocabulary as byte strings, for constrained
	// requests, built at the first one.
	vocab func() *constrain.Vocab

	mu       sync.Mutex
	incoming []*seq
	closing  bool
	stats    SchedulerStats
	wake     chan struct{}
	quit     chan struct{}
	exited   chan struct{}
	nextID   int
	admitted int64

	// owned by the loop
	queue   []*seq
	running []*seq
	lp      []float64 // scorePrompt's log-softmax of a row
}

// seq is one request inside the scheduler.
type seq struct {
	id        int
	req       Request
	ctx       context.Context
	stopWake  func() bool
	stream    *Stream
	tokens    []int // prompt then generated
	promptLen int
	n         int // tokens cached
	order     int64
	sampler   *Sampler
	tiers     *kv.PlaneSpec // the request's tier policy (nil: the cache's)
	dec       *tokenizer.DecodeStream
	stops     *stopMatcher // cuts the text at the request's stop strings
	stopIDs   map[int]bool
	cons      *constrain.Matcher // Request.Constraint's, advanced with each token
	res       Result
	submitted time.Time
	last      time.Time
}

// NewScheduler starts a scheduler over m, its tokenizer and cache, which it
// owns from now on: nothing else may call the model or the cache until
// Close returns. The cache must have a block pool and sequence slots.
func NewScheduler(m model.Model, tok *tokenizer.Tokenizer, cache kvcache.Cache, o SchedulerOptions) (*Scheduler, error) {
	if cache.TotalBlocks() <= 0 || cache.MaxSeqs() <= 0 || cache.BlockTokens() <= 0 {
		return nil, fmt.Errorf("engine: scheduler: the KV cache has %d blocks of %d tokens and %d sequence slots; it needs a sized pool (kvcache.Options.Blocks or MemoryBytes, and MaxSeqs)",
			cache.TotalBlocks(), cache.BlockTokens(), cache.MaxSeqs())
	}
	if o.MaxSeqs <= 0 || o.MaxSeqs > cache.MaxSeqs() {
		o.MaxSeqs = cache.MaxSeqs()
	}
	if o.PrefillChunk <= 0 {
		o.PrefillChunk = 256
	}
	nr := cache.BlockTokens()
	o.PrefillChunk = (o.PrefillChunk + nr - 1) / nr * nr
	if o.MaxQueue <= 0 {
		o.MaxQueue = 1024
	}
	limit := poolLimit(cache)
	if mp := m.Config().MaxPositions; mp > 0 {
		limit = min(limit, mp)
	}
	if o.Context > 0 {
		limit = min(limit, o.Context)
	}
	s := &Scheduler{m: m, tok: tok, cache: cache, opts: o, limit: limit,
		wake: make(chan struct{}, 1), quit: make(chan struct{}), exited: make(chan struct{})}
	s.stats.TotalBlocks, s.stats.FreeBlocks = cache.TotalBlocks(), cache.FreeBlocks()
	if f := cache.Format(); f.Planes.On {
		p := f.Planes
		s.tierSpec = &p
	}
	s.cacheSpec = cache.Format().Spec.String()
	s.vocab = sync.OnceValue(func() *constrain.Vocab { return TokenVocab(tok, m.Config().Vocab) })
	go s.loop()
	return s, nil
}

// poolLimit is the most tokens (prompt plus new) one request may use when
// it has the whole pool: its cache then holds all of them but the last
// sampled one. A cache with a residual block (every format but bw) holds
// a partial block besides its full ones, (blocks+1)·Nr - 1 tokens in all;
// one without (bw) fills a block from its first token, blocks·Nr.
func poolLimit(c kvcache.Cache) int {
	total, nr := c.TotalBlocks(), c.BlockTokens()
	limit := (total+1)*nr - 1
	for limit > 1 && c.BlocksNeeded(-1, limit-1) > total { // id -1 is never a sequence
		limit--
	}
	return limit
}

// ParseKVTiers returns the tier policy that Request.KVTiers s gives over
// the scheduler's cache, or a *TiersError (ErrNoTiers when the cache is
// without tiers).
// It is safe for concurrent use (it reads what NewScheduler noted of the
// cache, never the cache).
func (s *Scheduler) ParseKVTiers(kvTiers string) (kv.PlaneSpec, error) {
	if s.tierSpec == nil {
		err := ErrNoTiers
		if s.cacheSpec != "" {
			err = fmt.Errorf("%w; this one is %s", ErrNoTiers, s.cacheSpec)
		}
		return kv.PlaneSpec{}, &TiersError{KVTiers: kvTiers, Err: err}
	}
	p, err := kv.ParsePlanePolicy(kvTiers, *s.tierSpec)
	if err != nil {
		return kv.PlaneSpec{}, &TiersError{KVTiers: kvTiers, Err: err}
	}
	return p, nil
}

// ContextLimit returns the most tokens (prompt plus new) a request may use:
// the model's context, or what the whole KV cache holds if that is less.
func (s *Scheduler) ContextLimit() int { return s.limit }

// Options returns the scheduler's options after defaults.
func (s *Scheduler) Options() SchedulerOptions { return s.opts }

// Stats returns a snapshot of the scheduler's counters.
func (s *Scheduler) Stats() SchedulerStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Queued += len(s.incoming)
	return st
}

// Submit queues a request; ctx cancels it (at the next step, freeing its
// blocks). The returned Stream delivers its text.
func (s *Scheduler) Submit(ctx context.Context, r Request) (*Stream, error) {
	if len(r.Prompt) == 0 {
		return nil, errors.New("engine: empty prompt")
	}
	vocab := s.m.Config().Vocab
	for i, t := range r.Prompt {
		if t < 0 || t >= vocab {
			return nil, fmt.Errorf("engine: prompt token %d has id %d, outside the vocabulary [0, %d)", i, t, vocab)
		}
	}
	if r.MaxTokens < 1 && !(r.MaxTokens == 0 && r.PromptLogprobs) {
		return nil, fmt.Errorf("engine: max tokens %d must be >= 1 (0 only to score the prompt, with PromptLogprobs)", r.MaxTokens)
	}
	if err := r.Sample.Validate(); err != nil {
		return nil, err
	}
	var tiers *kv.PlaneSpec
	if r.KVTiers != "" {
		p, err := s.ParseKVTiers(r.KVTiers)
		if err != nil {
			return nil, err
		}
		tiers = &p
	}
	if err := checkStops(r.Stop); err != nil {
		return nil, err
	}
	// Compared without adding: MaxTokens may be any int (2^63-1 included).
	if len(r.Prompt) > s.limit || r.MaxTokens > s.limit-len(r.Prompt) {
		what := "the KV cache"
		if mp := s.m.Config().MaxPositions; mp > 0 && s.limit == mp {
			what = "the model's context"
		}
		return nil, &ContextError{PromptTokens: len(r.Prompt), MaxTokens: r.MaxTokens, Limit: s.limit, What: what}
	}
	stopIDs := r.StopIDs
	if stopIDs == nil {
		stopIDs = s.tok.StopIDs()
	}
	q := &seq{req: r, ctx: ctx, stream: newStream(), tokens: append([]int(nil), r.Prompt...), promptLen: len(r.Prompt),
		sampler: NewSampler(r.Sample), tiers: tiers, stops: newStopMatcher(r.Stop), dec: s.tok.NewDecodeStream(tokenizer.DecodeOptions{SkipSpecial: true}),
		stopIDs: map[int]bool{}, submitted: time.Now()}
	for _, id := range stopIDs {
		q.stopIDs[id] = true
	}
	if r.Constraint != nil {
		q.cons = constrain.NewMatcher(r.Constraint, s.vocab(), stopIDs)
	}
	q.res.PromptTokens = len(r.Prompt)
	// Set before q is published: the loop reads it once q is in incoming.
	q.stopWake = context.AfterFunc(ctx, s.signal)
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		q.stopWake()
		return nil, ErrClosed
	}
	if len(s.incoming)+s.stats.Queued >= s.opts.MaxQueue {
		s.mu.Unlock()
		q.stopWake()
		return nil, fmt.Errorf("%w (%d requests waiting)", ErrQueueFull, s.opts.MaxQueue)
	}
	s.nextID++
	q.id = s.nextID
	s.incoming = append(s.incoming, q)
	s.mu.Unlock()
	s.signal()
	return q.stream, nil
}

func (s *Scheduler) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Shutdown stops accepting requests, waits until the running and queued
// ones finish or ctx ends, then closes the scheduler (failing what is left
// with ErrClosed).
func (s *Scheduler) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var err error
	for {
		st := s.Stats()
		if st.Queued == 0 && st.Running == 0 {
			break
		}
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-tick.C:
			continue
		}
		break
	}
	s.Close()
	return err
}

// Close stops the scheduler at once: requests still queued or running end
// with FinishError and ErrClosed, their blocks freed. Close waits for the
// scheduler's goroutine to exit.
func (s *Scheduler) Close() {
	s.mu.Lock()
	s.closing = true
	select {
	case <-s.quit:
	default:
		close(s.quit)
	}
	s.mu.Unlock()
	<-s.exited
}

func (s *Scheduler) loop() {
	defer close(s.exited)
	for {
		s.mu.Lock()
		s.queue = append(s.queue, s.incoming...)
		s.incoming = s.incoming[:0]
		s.mu.Unlock()
		select {
		case <-s.quit:
			for _, q := range append(s.running, s.queue...) {
				s.end(q, FinishError, ErrClosed)
			}
			s.running, s.queue = nil, nil
			s.publish()
			return
		default:
		}
		s.dropCancelled()
		s.admit()
		s.publish()
		if len(s.running) == 0 {
			select {
			case <-s.wake:
			case <-s.quit:
			}
			continue
		}
		s.step()
		s.publish()
	}
}

// publish copies the loop's counts into the stats snapshot.
func (s *Scheduler) publish() {
	s.mu.Lock()
	s.stats.Queued, s.stats.Running = len(s.queue), len(s.running)
	s.stats.FreeBlocks, s.stats.TotalBlocks = s.cache.FreeBlocks(), s.cache.TotalBlocks()
	if ts, ok := s.cache.TierStats(); ok {
		s.stats.Tiers = &ts
	}
	s.mu.Unlock()
}

func (s *Scheduler) count(f func(st *SchedulerStats)) {
	s.mu.Lock()
	f(&s.stats)
	s.mu.Unlock()
}

// dropCancelled ends the requests whose context is done.
func (s *Scheduler) dropCancelled() {
	keep := s.running[:0]
	for _, q := range s.running {
		if err := q.ctx.Err(); err != nil {
			s.end(q, FinishCancelled, err)
			continue
		}
		keep = append(keep, q)
	}
	clear(s.running[len(keep):])
	s.running = keep
	kq := s.queue[:0]
	for _, q := range s.queue {
		if err := q.ctx.Err(); err != nil {
			s.end(q, FinishCancelled, err)
			continue
		}
		kq = append(kq, q)
	}
	clear(s.queue[len(kq):])
	s.queue = kq
}

// admit moves requests from the head of the queue to running while a slot
// and the blocks of the request's prompt are free, keeping one free block
// per running sequence for its next decode steps. The queue is strictly
// FIFO: a request that does not fit blocks those behind it.
func (s *Scheduler) admit() {
	for len(s.queue) > 0 && len(s.running) < s.opts.MaxSeqs {
		q := s.queue[0]
		shared := q.tokens[:q.promptLen]
		if q.req.PromptLogprobs {
			shared = shared[:1] // every prompt row computed: no prefix to share
		}
		cached, err := s.cache.Open(q.id, shared)
		if err != nil {
			if errors.Is(err, kvcache.ErrNoSlot) || errors.Is(err, kvcache.ErrOutOfBlocks) {
				return
			}
			s.queue = s.queue[1:]
			s.end(q, FinishError, err)
			continue
		}
		if q.tiers != nil {
			// Submit checked that the cache has tiers.
			if err := s.cache.SetTierPolicy(q.id, *q.tiers); err != nil {
				s.queue = s.queue[1:]
				s.end(q, FinishError, err) // end removes the sequence
				continue
			}
		}
		need := s.cache.BlocksNeeded(q.id, q.promptLen-cached)
		if need+len(s.running) > s.cache.FreeBlocks() && len(s.running) > 0 {
			s.cache.Remove(q.id)
			return
		}
		s.queue = s.queue[1:]
		q.n = cached
		if q.res.Preemptions == 0 {
			q.res.Queued = time.Since(q.submitted)
			q.res.CachedTokens = cached
			s.count(func(st *SchedulerStats) { st.CachedTokens += int64(cached) })
		}
		s.admitted++
		q.order = s.admitted
		s.running = append(s.running, q)
	}
}

// step runs one forward pass: a token of every decoding sequence and at
// most one prefill chunk.
func (s *Scheduler) step() {
	var b model.Batch
	var in []*seq
	for {
		b, in = s.plan()
		need := 0
		for i, sq := range b.Seqs {
			need += s.cache.BlocksNeeded(in[i].id, sq.Len)
		}
		if need <= s.cache.FreeBlocks() || len(in) == 0 {
			break
		}
		// Preempt and plan again; if nothing could be preempted, the
		// running set changed too (the last sequence ended), so plan again.
		s.preemptYoungest()
	}
	if len(in) == 0 {
		return
	}
	for i, q := range in {
		// What the sampler needs of the row; a prefill chunk before the
		// prompt's end samples nothing, so its row's token is enough.
		b.Seqs[i].Output = model.OutputToken
		if q.n+b.Seqs[i].Len == len(q.tokens) {
			b.Seqs[i].Output = outputOf(q.sampler, len(q.res.Tokens), q.cons)
		}
		// A chunk whose rows score prompt tokens not yet scored needs every
		// row of the batch (model.Batch.AllLogits: each sequence's own
		// rows; a decoding sequence's one row is its last).
		if q.req.PromptLogprobs && len(q.res.PromptLogprobs) < q.promptLen-1 && b.Seqs[i].Pos < q.promptLen-1 {
			b.AllLogits = true
		}
	}
	logits, err := s.m.Forward(&b, s.cache)
	s.count(func(st *SchedulerStats) { st.Steps++ })
	if err != nil {
		if errors.Is(err, kvcache.ErrOutOfBlocks) && s.preemptYoungest() {
			return
		}
		for _, q := range in {
			s.remove(q)
			s.end(q, FinishError, err)
		}
		return
	}
	now := time.Now()
	pre := s.samplePar(in, &b, logits)
	for i, q := range in {
		sq := b.Seqs[i]
		n := sq.Len
		if q.n < q.promptLen {
			s.count(func(st *SchedulerStats) { st.PromptTokens += int64(n) })
		}
		row := lastRow(&b, i)
		if b.AllLogits && q.req.PromptLogprobs {
			s.scorePrompt(q, logits, sq)
		}
		q.n += n
		if q.n != len(q.tokens) {
			continue
		}
		if q.req.MaxTokens == 0 { // the prompt scored, nothing to generate
			s.finish(q, FinishLength, false)
			continue
		}
		s.sample(q, logits, row, now, pre[i])
	}
}

// lastRow is the row of b's logits that holds sequence i's last token: i,
// or its own last row when the batch asked for every row (AllLogits).
func lastRow(b *model.Batch, i int) int {
	if b.AllLogits {
		return b.Seqs[i].Start + b.Seqs[i].Len - 1
	}
	return i
}

// outputOf is what sampling the next token needs of a row: the sampler's
// Output, or the whole row under a constraint (its mask needs every
// logit).
func outputOf(s *Sampler, generated int, cons *constrain.Matcher) model.Output {
	if cons != nil {
		return model.OutputLogits
	}
	return s.Output(generated)
}

// parSampleMinWork is the fewest logits (rows times vocabulary) that
// samplePar spreads over goroutines: below it one goroutine is faster.
var parSampleMinWork = 1 << 17 // a variable: tests force either path

// samplePar samples, on up to GOMAXPROCS goroutines, the next token of
// every sequence of the step that draws from a whole row without a
// constraint (temperature, penalties or log probabilities: ~2 ms a row
// over a 128K vocabulary, mostly its exp). Each sequence has its own
// sampler and row, so the tokens are those of sampling one by one; the
// rest (greedy tokens picked by the device, constrained rows, whose
// grammars share caches) are sampled in order by sample. pre[i] is nil
// where sample draws itself.
func (s *Scheduler) samplePar(in []*seq, b *model.Batch, logits *model.Logits) []*SampledToken {
	pre := make([]*SampledToken, len(in))
	var todo []int // the sequences drawn here
	work := 0
	for i, q := range in {
		sq := b.Seqs[i]
		if q.n+sq.Len != len(q.tokens) || q.req.MaxTokens == 0 || q.cons != nil || q.req.PromptLogprobs || sq.Output != model.OutputLogits {
			continue
		}
		todo = append(todo, i)
		work += len(logits.Row(lastRow(b, i)))
	}
	workers := min(len(todo), runtime.GOMAXPROCS(0))
	if workers < 2 || work < parSampleMinWork {
		return pre
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				j := int(next.Add(1)) - 1
				if j >= len(todo) {
					return
				}
				i := todo[j]
				q := in[i]
				tok := q.sampler.SampleRow(logits, lastRow(b, i), q.tokens, len(q.res.Tokens))
				pre[i] = &tok
			}
		})
	}
	wg.Wait()
	return pre
}

// scorePrompt appends to q's prompt log probabilities those that the rows
// of sq (a batch with AllLogits) give and q has not got yet: row k, at
// position sq.Pos+k, predicts prompt token sq.Pos+k+1. A sequence
// recomputed after preemption scores nothing twice.
func (s *Scheduler) scorePrompt(q *seq, logits *model.Logits, sq model.Seq) {
	top := 0
	if q.req.Sample.Logprobs {
		top = q.req.Sample.TopLogprobs
	}
	for k := range sq.Len {
		next := sq.Pos + k + 1
		if next >= q.promptLen || next-1 != len(q.res.PromptLogprobs) {
			continue
		}
		s.lp = logSoftmaxInto(s.lp, logits.Row(sq.Start+k))
		id := q.tokens[next]
		q.res.PromptLogprobs = append(q.res.PromptLogprobs, SampledToken{
			TokenLogprob: TokenLogprob{ID: id, Logprob: s.lp[id]}, Top: topLogprobs(s.lp, top)})
		if len(q.res.PromptLogprobs) == q.promptLen-1 {
			q.stream.pushPrompt(q.res.PromptLogprobs)
		}
	}
}

// plan builds the next batch from the running sequences.
func (s *Scheduler) plan() (model.Batch, []*seq) {
	var b model.Batch
	var in []*seq
	prefill := false
	for _, q := range s.running {
		switch {
		case q.n >= q.promptLen:
			b.Add(q.id, q.n, int32(q.tokens[q.n]))
		case !prefill:
			c := s.opts.PrefillChunk
			end := min(q.promptLen, (q.n/c+1)*c)
			ids := make([]int32, end-q.n)
			for i, t := range q.tokens[q.n:end] {
				ids[i] = int32(t)
			}
			b.Add(q.id, q.n, ids...)
			prefill = true
		default:
			continue
		}
		in = append(in, q)
	}
	return b, in
}

// preemptYoungest frees the blocks of the most recently admitted running
// sequence and requeues it at the front; false if none can be preempted
// (then the last one ends with an error).
func (s *Scheduler) preemptYoungest() bool {
	if len(s.running) == 0 {
		return false
	}
	yi := 0
	for i, q := range s.running {
		if q.order > s.running[yi].order {
			yi = i
		}
	}
	q := s.running[yi]
	s.running = append(s.running[:yi], s.running[yi+1:]...)
	s.cache.Remove(q.id)
	if len(s.running) == 0 {
		// Alone and still out of blocks: it cannot fit (Submit's check
		// makes this a bug, not a user error).
		s.end(q, FinishError, fmt.Errorf("%w: a lone sequence of %d tokens does not fit", kvcache.ErrOutOfBlocks, len(q.tokens)))
		return false
	}
	q.n = 0
	q.res.Preemptions++
	s.count(func(st *SchedulerStats) { st.Preemptions++ })
	s.queue = append([]*seq{q}, s.queue...)
	return true
}

func (s *Scheduler) remove(q *seq) {
	for i, r := range s.running {
		if r == q {
			s.running = append(s.running[:i], s.running[i+1:]...)
			break
		}
	}
	s.cache.Remove(q.id)
}

// sample picks q's next token, streams its text and ends q when a stop
// condition holds.
func (s *Scheduler) sample(q *seq, logits *model.Logits, row int, now time.Time, pre *SampledToken) {
	var tok SampledToken
	switch {
	case pre != nil:
		tok = *pre
	case q.cons != nil:
		var ok bool
		tok, ok = q.sampler.SampleConstrained(logits.Row(row), q.tokens, len(q.res.Tokens), q.cons)
		switch {
		case !ok && q.cons.Complete():
			s.finish(q, FinishStop, false)
			return
		case !ok:
			s.remove(q)
			s.end(q, FinishError, ErrConstraint)
			return
		case !q.stopIDs[tok.ID]:
			if err := q.cons.Accept(tok.ID); err != nil { // SampleConstrained picks allowed tokens only
				s.remove(q)
				s.end(q, FinishError, err)
				return
			}
		}
	default:
		tok = q.sampler.SampleRow(logits, row, q.tokens, len(q.res.Tokens))
	}
	next := tok.ID
	if len(q.res.Tokens) == 0 {
		q.res.TTFT = now.Sub(q.submitted)
		if s.opts.OnFirstToken != nil {
			s.opts.OnFirstToken(q.res.TTFT)
		}
	} else if s.opts.OnToken != nil {
		s.opts.OnToken(now.Sub(q.last))
	}
	q.last = now
	if q.stopIDs[next] {
		s.finish(q, FinishStop, false)
		return
	}
	if q.req.Sample.Logprobs {
		q.res.Logprobs = append(q.res.Logprobs, tok)
		q.stream.pushToken(tok)
	}
	q.tokens = append(q.tokens, next)
	q.res.Tokens = append(q.res.Tokens, next)
	q.res.CompletionTokens++
	s.count(func(st *SchedulerStats) { st.GeneratedTokens++ })
	out, hit := q.stops.add(q.dec.Step(next))
	q.stream.push(out)
	if hit {
		s.finish(q, FinishStop, true)
		return
	}
	if q.res.CompletionTokens >= q.req.MaxTokens || len(q.tokens) >= s.limit {
		s.finish(q, FinishLength, false)
	}
}

// finish ends a running request normally.
func (s *Scheduler) finish(q *seq, reason string, stopString bool) {
	if !stopString {
		out, hit := q.stops.add(q.dec.Flush())
		if !hit {
			out += q.stops.flush()
		} else if reason == FinishLength {
			reason = FinishStop
		}
		q.stream.push(out)
	}
	s.remove(q)
	s.end(q, reason, nil)
}

// end delivers q's result (its blocks must already be freed, or never
// taken).
func (s *Scheduler) end(q *seq, reason string, err error) {
	s.cache.Remove(q.id)
	if q.stopWake != nil {
		q.stopWake()
	}
	q.res.FinishReason, q.res.Err = reason, err
	if len(q.res.Tokens) > 0 {
		q.res.Decode = q.last.Sub(q.submitted) - q.res.TTFT
	}
	s.count(func(st *SchedulerStats) {
		switch reason {
		case FinishCancelled:
			st.Cancelled++
		case FinishError:
			st.Fail++
		default:
			st.Finished++
		}
	})
	s.publish() // the freed blocks show in Stats before the client sees its end
	q.stream.finish(q.res)
}

// TokenVocab returns the vocabulary of tok as constrained decoding sees it:
// for each of the model's vocab ids, the bytes it adds to the text
// (tokenizer.TokenBytes; none for special tokens and ids past the
// tokenizer's).
func TokenVocab(tok *tokenizer.Tokenizer, vocab int) *constrain.Vocab {
	toks := make([][]byte, vocab)
	for id := range toks {
		toks[id] = tok.TokenBytes(id)
	}
	return constrain.NewVocab(toks)
}
