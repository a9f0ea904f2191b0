// Command tinymodel prepares the corpus and tokenizer of bitdecode's embedded
// default model (model/gotiny):
//
//	go run ./tools/tinymodel prepare -out .gpu/tiny/data
//
// prepare collects the Go standard library sources of $(go env GOROOT)/src,
// holds out about 3% of the packages, trains a byte-level BPE tokenizer,
// checks it against the tokenizer package, and writes the token files that
// tools/tinymodel/train.py trains on (see README.md there).
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: tinymodel prepare [-out DIR] [-vocab N] [-heldout-pct P] [-goroot DIR]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "prepare":
		fs := flag.NewFlagSet("prepare", flag.ExitOnError)
		out := fs.String("out", ".gpu/tiny/data", "output directory")
		vocab := fs.Int("vocab", 2048, "tokenizer vocabulary size, specials included")
		heldout := fs.Int("heldout-pct", 3, "percent of packages held out (by a hash of the import path)")
		goroot := fs.String("goroot", "", "Go root to read src/ from (default: runtime.GOROOT or $(go env GOROOT))")
		_ = fs.Parse(os.Args[2:])
		err = prepare(*out, *goroot, *vocab, *heldout)
	default:
		fmt.Fprintf(os.Stderr, "tinymodel: unknown command %q (want prepare)\n", os.Args[1])
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tinymodel:", err)
		os.Exit(1)
	}
}
