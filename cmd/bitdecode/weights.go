package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/bitdecode/bitdecode/model"
	"github.com/bitdecode/bitdecode/wq"
)

// parseWeightSpec parses a --weights value, printing the grammar on error.
func parseWeightSpec(s string) (wq.Spec, error) {
	sp, err := wq.ParseSpec(s)
	if err != nil {
		return sp, usageErrorf("%v\n\n%s", err, indent(wq.SpecGrammar))
	}
	return sp, nil
}

// parseIntList parses a comma-separated list of non-negative integers.
func parseIntList(flagName, s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.Atoi(f)
		if err != nil || v < 0 {
			return nil, usageErrorf("--%s %q: want non-negative integers separated by commas", flagName, s)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, usageErrorf("--%s: empty list", flagName)
	}
	return out, nil
}

// weightLine describes a model's weight memory for the stats line.
func weightLine(wm model.WeightMemory) string {
	s := fmt.Sprintf("weights %s: %s (fp16 would be %s)", wm.Format, humanBytes(wm.Bytes), humanBytes(wm.FP16Bytes))
	switch {
	case wm.DECKChunk > 0:
		s += fmt.Sprintf(", DEC k_chunk %d with %s of residuals in host memory", wm.DECKChunk, humanBytes(wm.DECBytes))
	case len(wm.DECPerLayer) > 0:
		s += fmt.Sprintf(", DEC k_chunk per layer (%s) with %s of residuals in host memory", decLabel(wm), humanBytes(wm.DECBytes))
	}
	return s
}
