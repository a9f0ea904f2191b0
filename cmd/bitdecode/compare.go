package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/bitdecode/bitdecode/engine"
)

// writeCompareTable prints one row per KV format: speed, the KV memory of
// the generated sequence and of one filling the model's context (full
// tokens), each next to the first row's (the fp16 baseline), and the tokens
// agreeing with the first row; then a line saying what the last row saves.
func writeCompareTable(w io.Writer, runs []engine.FormatRun, full int) {
	if len(runs) == 0 {
		return
	}
	base := runs[0]
	short, _, _ := strings.Cut(base.Spec.String(), ":") // "fp16" of "fp16:res128"
	n := base.Stats.PromptTokens + base.Stats.GeneratedTokens
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "KV cache\tprefill tok/s\tdecode tok/s\tKV at %d tokens\tvs %s\tKV at %d tokens\tvs %s\ttokens as %s\t\n",
		n, short, full, short, short)
	for i, r := range runs {
		now, whole := "", ""
		if i > 0 {
			now, whole = ratio(r.Stats.KVBytes, base.Stats.KVBytes), ratio(r.FullBytes, base.FullBytes)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.1f\t%s\t%s\t%s\t%s\t%d/%d\t\n", r.Spec,
			float64(r.Stats.PromptTokens)/max(r.Stats.Prefill.Seconds(), 1e-9), r.Stats.DecodeTokensPerSecond(),
			humanBytes(r.Stats.KVBytes), now, humanBytes(r.FullBytes), whole, r.Agree, len(base.Stats.Tokens))
	}
	tw.Flush()
	if len(runs) < 2 {
		return
	}
	last := runs[len(runs)-1]
	fmt.Fprintf(w, "%s KV vs %s KV: %s at %d tokens, %s at the full %d-token context; decode %.1f vs %.1f tok/s\n",
		last.Spec, base.Spec, saved(last.Stats.KVBytes, base.Stats.KVBytes), n,
		saved(last.FullBytes, base.FullBytes), full, last.Stats.DecodeTokensPerSecond(), base.Stats.DecodeTokensPerSecond())
}

// ratio formats a against b as "3.2x less" or "1.3x more".
func ratio(a, b int64) string {
	switch {
	case a <= 0 || b <= 0:
		return "-"
	case a <= b:
		return fmt.Sprintf("%.1fx less", float64(b)/float64(a))
	}
	return fmt.Sprintf("%.1fx more", float64(a)/float64(b))
}

// saved formats the memory a saves against b: "744.0 KiB saved (65%)".
func saved(a, b int64) string {
	if b <= 0 {
		return "-"
	}
	if a > b {
		return fmt.Sprintf("%s more (+%.0f%%)", humanBytes(a-b), 100*float64(a-b)/float64(b))
	}
	return fmt.Sprintf("%s saved (%.0f%%)", humanBytes(b-a), 100*float64(b-a)/float64(b))
}
