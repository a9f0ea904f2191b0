package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/bitdecode/bitdecode/engine"
	"github.com/bitdecode/bitdecode/kvcache"
	"github.com/bitdecode/bitdecode/tokenizer"
)

var chatCmd = &command{
	name:    "chat",
	usage:   "[--model DIR] [--kv SPEC] [--weights SPEC] [--system TEXT] [--device auto|cpu|cuda] [--tp N] [--max-tokens N] [sampling flags]",
	summary: "talk with a model in the terminal: history kept, the model's chat template, a low-bit KV cache",
	help: `Reads one user message per line from standard input and streams the
model's answer to standard output, keeping the conversation: each turn is
rendered with the model's chat template (tokenizer_config.json or
chat_template.jinja, rendered by bitdecode's Jinja interpreter as
transformers renders it; a template that fails is an error naming its line;
without a template, a built-in format chosen by the vocabulary's special
tokens, or a plain "user: ... assistant:" fallback, said once on stderr) and
only the new tokens are prefilled, the earlier turns staying in the KV cache.

--system sets the system message. A line "/reset" starts a new
conversation, "/exit" (or end of input) ends the session. The conversation
is limited to the model's context (or --ctx-size); when it is full, start
over with /reset.

` + tpHelp + `

examples:
  bitdecode chat --model DIR --kv int4 --system "You are a terse Go expert."
  printf 'write a loop\n' | bitdecode chat`,
}

func init() {
	flagSets["chat"] = func() *flag.FlagSet {
		fs := flag.NewFlagSet("chat", flag.ContinueOnError)
		addChatFlags(fs)
		return fs
	}
	chatCmd.run = runChat
	register(chatCmd)
}

type chatFlags struct {
	weightFlags
	modelDir, kvSpec, device, system       *string
	chatTemplate                           *string
	maxTokens, topK, ctx, tp               *int
	temperature, topP, minP, repeatPenalty *float64
	seed                                   *uint64
	quiet                                  *bool
}

func addChatFlags(fs *flag.FlagSet) chatFlags {
	return chatFlags{
		weightFlags:   addWeightFlags(fs),
		modelDir:      fs.String("model", "", modelHelp),
		kvSpec:        fs.String("kv", "int4", "KV cache format spec"),
		device:        fs.String("device", "auto", "auto, cpu or cuda"),
		tp:            addTPFlag(fs),
		system:        fs.String("system", "", "system message of the conversation"),
		chatTemplate:  fs.String("chat-template", "", chatTemplateHelp),
		maxTokens:     fs.Int("max-tokens", 512, "new tokens per answer at most (>= 1)"),
		ctx:           fs.Int("ctx-size", 0, "cap the conversation's context, in tokens (0: the model's context)"),
		topK:          fs.Int("top-k", 0, "sample from the K most likely tokens (0: all)"),
		temperature:   fs.Float64("temperature", 0.7, "sampling temperature (0: greedy)"),
		topP:          fs.Float64("top-p", 0.9, "nucleus sampling mass (0: off)"),
		minP:          fs.Float64("min-p", 0, "drop tokens below this fraction of the best one's probability (0: off)"),
		repeatPenalty: fs.Float64("repeat-penalty", 1, "penalty for tokens already in the context (1: off)"),
		seed:          fs.Uint64("seed", 0, "sampler seed"),
		quiet:         fs.Bool("quiet", false, "no banner, progress or statistics on stderr"),
	}
}

func runChat(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet(chatCmd, stdout)
	f := addChatFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if _, err := resolveModel(f.modelDir, stderr, *f.quiet); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected argument %q: chat reads its messages from standard input", fs.Arg(0))
	}
	if *f.maxTokens < 1 || *f.ctx < 0 {
		return usageErrorf("--max-tokens %d, --ctx-size %d: want at least one token and a non-negative context", *f.maxTokens, *f.ctx)
	}
	spec, err := parseSpecChecked(*f.kvSpec)
	if err != nil {
		return err
	}
	sample := engine.SampleOptions{Temperature: *f.temperature, TopK: *f.topK, TopP: *f.topP, MinP: *f.minP, RepeatPenalty: *f.repeatPenalty, Seed: *f.seed}
	if err := sample.Validate(); err != nil {
		return usageErrorf("%v", err)
	}
	o, err := openOptions(*f.modelDir, *f.device, *f.tp, f.weightFlags, stderr, *f.quiet)
	if err != nil {
		return err
	}
	lm, err := engine.Open(*f.modelDir, o)
	if err != nil {
		return err
	}
	defer lm.Close()
	limit := contextLimit(lm.Config().MaxPositions, *f.ctx)
	if limit <= 0 {
		limit = 8192
	}
	if err := useChatTemplate(lm, *f.chatTemplate); err != nil {
		return err
	}
	ct := lm.Tokenizer.ChatTemplate()
	if !*f.quiet {
		fmt.Fprintf(stderr, "chat with %s on %s, KV cache %s, template %s; /reset starts over, /exit ends\n", lm.Name, lm.Backend.Name(), spec, ct)
		if ct.Format == tokenizer.ChatPlain {
			fmt.Fprintf(stderr, "the model has no chat template: using the plain fallback \"user: MESSAGE\\n\\nassistant:\"\n")
		}
	}
	c := &conversation{lm: lm, limit: limit, system: *f.system}
	if c.cache, err = lm.NewCache(spec, kvcache.Options{MaxSeqs: 1, MaxLen: limit, MaxChunk: 512}); err != nil {
		return err
	}
	defer c.cache.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 16<<20)
	for {
		if !*f.quiet {
			fmt.Fprint(stderr, "> ")
		}
		if !in.Scan() {
			if !*f.quiet {
				fmt.Fprintln(stderr)
			}
			return in.Err()
		}
		line := strings.TrimSpace(in.Text())
		switch line {
		case "":
			continue
		case "/exit", "/quit":
			return nil
		case "/reset":
			c.reset()
			continue
		}
		st, err := c.turn(ctx, line, engine.GenerateOptions{MaxTokens: *f.maxTokens, ChunkTokens: 512, Sample: sample}, stdout)
		fmt.Fprintln(stdout)
		if errors.Is(err, errContextFull) {
			fmt.Fprintf(stderr, "%v\n", err)
			continue
		}
		if err != nil {
			return err
		}
		if !*f.quiet {
			fmt.Fprintf(stderr, "[%d new prompt tokens, %d tokens at %.1f tok/s, %s; context %d of %d]\n",
				st.PromptTokens-c.cachedBefore, st.GeneratedTokens, st.DecodeTokensPerSecond(), st.StopReason, c.cache.Len(0), limit)
		}
		sample.Seed++ // each answer samples afresh
	}
}

// errContextFull is the error of a turn that does not fit the context.
var errContextFull = errors.New("the conversation fills the context: /reset starts a new one")

// conversation is a chat session: its messages and the KV cache holding
// the tokens of the turns so far (sequence 0).
type conversation struct {
	lm           *engine.Model
	cache        kvcache.Cache
	limit        int
	system       string
	msgs         []tokenizer.Message
	cached       []int // the tokens the cache holds, in order
	cachedBefore int   // of them, reused by the last turn
}

// reset starts a new conversation.
func (c *conversation) reset() {
	c.msgs, c.cached = nil, nil
	c.cache.Remove(0)
}

// turn adds a user message, generates the answer into w and keeps both.
// The cache keeps the longest prefix of the rendered conversation it
// already holds (truncated to a length it can keep: whole packed blocks);
// only the rest is prefilled.
func (c *conversation) turn(ctx context.Context, text string, opts engine.GenerateOptions, w io.Writer) (engine.Stats, error) {
	msgs := append(append([]tokenizer.Message(nil), c.msgs...), tokenizer.Message{Role: "user", Content: text})
	all := msgs
	if c.system != "" {
		all = append([]tokenizer.Message{{Role: "system", Content: c.system}}, msgs...)
	}
	ids, err := c.lm.Tokenizer.EncodeChat(all, tokenizer.ChatOptions{AddGenerationPrompt: true})
	if err != nil {
		return engine.Stats{}, err
	}
	if len(ids) >= c.limit {
		return engine.Stats{}, fmt.Errorf("%w (%d of %d tokens)", errContextFull, len(ids), c.limit)
	}
	opts.MaxTokens = min(opts.MaxTokens, c.limit-len(ids))
	p := 0
	for p < len(c.cached) && p < len(ids)-1 && c.cached[p] == ids[p] {
		p++
	}
	keep := c.keepable(p)
	opts.Cached = keep
	c.cachedBefore = keep
	var answer strings.Builder
	st, err := engine.Generate(ctx, c.lm.Model, c.lm.Tokenizer, c.cache, 0, ids, opts, func(s string) {
		fmt.Fprint(w, s)
		answer.WriteString(s)
	})
	if err != nil {
		c.reset()
		return st, err
	}
	// The cache now holds the prompt and all generated tokens but the last.
	c.cached = append(ids[:len(ids):len(ids)], st.Tokens...)
	c.cached = c.cached[:c.cache.Len(0)]
	c.msgs = append(msgs, tokenizer.Message{Role: "assistant", Content: answer.String()})
	return st, nil
}

// keepable truncates the cache to at most p tokens it can keep (whole
// packed blocks, or the residual) and returns the length kept.
func (c *conversation) keepable(p int) int {
	if c.cache.Len(0) == 0 {
		return 0
	}
	nr := c.cache.BlockTokens()
	for _, n := range []int{p, p / nr * nr, 0} {
		if c.cache.Truncate(0, n) == nil {
			c.cached = c.cached[:min(n, len(c.cached))]
			return n
		}
	}
	c.reset()
	return 0
}
