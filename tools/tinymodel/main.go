// Command tinymodel prepares the corpus and tokenizer of bitdecode's embedded
// default model, and writes the placeholder model that stands in for it
// until a trained one is installed.
//
//	go run ./tools/tinymodel prepare -out .gpu/tiny/data
//	go run ./tools/tinymodel placeholder -out internal/tinymodel/files
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
		fmt.Fprintln(os.Stderr, "usage: tinymodel prepare|placeholder [flags]")
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
	case "placeholder":
		fs := flag.NewFlagSet("placeholder", flag.ExitOnError)
		out := fs.String("out", "internal/tinymodel/files", "directory with tokenizer.json (from prepare) to write the placeholder model into")
		_ = fs.Parse(os.Args[2:])
		err = placeholder(*out)
	default:
		fmt.Fprintf(os.Stderr, "tinymodel: unknown command %q (want prepare or placeholder)\n", os.Args[1])
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tinymodel:", err)
		os.Exit(1)
	}
}
