// Command bitdecode is a long-context LLM inference engine whose KV cache is
// stored at 2, 4 or 8 bits and read faster than fp16.
//
// This file only wires subcommands to the packages that do the work.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"sort"
	"strings"

	"github.com/bitdecode/bitdecode/backend"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

// command is one subcommand: its usage line, one-line summary, long help
// and the function that runs it.
type command struct {
	name    string
	usage   string // arguments after the name
	summary string
	help    string
	run     func(args []string, stdout, stderr io.Writer) error
}

var commands = map[string]*command{}

func register(c *command) { commands[c.name] = c }

// errUsage marks an error in the arguments: usage is printed and the exit
// code is 2.
type errUsage struct{ msg string }

func (e errUsage) Error() string { return e.msg }

func usageErrorf(format string, a ...any) error { return errUsage{fmt.Sprintf(format, a...)} }

func main() {
	os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr))
}

func runMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		printTopUsage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		if len(args) > 1 {
			if c, ok := commands[args[1]]; ok {
				printHelp(stdout, c)
				return 0
			}
		}
		printTopUsage(stdout)
		return 0
	case "-version", "--version", "version":
		fmt.Fprintf(stdout, "bitdecode %s\n", version)
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "bitdecode: unknown command %q\nRun 'bitdecode help' for the list of commands.\n", args[0])
		return 2
	}
	// The edge: the devices read their settings (BITDECODE_*) here, once.
	if err := backend.ConfigureDevices(lookupEnv); err != nil {
		fmt.Fprintf(stderr, "bitdecode: %v\n", err)
		return 1
	}
	stop, err := startProfile(lookupEnv)
	if err != nil {
		fmt.Fprintf(stderr, "bitdecode: %v\n", err)
		return 1
	}
	err = c.run(args[1:], stdout, stderr)
	stop()
	var ue errUsage
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "bitdecode %s: %v\nusage: bitdecode %s %s\nRun 'bitdecode help %s' for details.\n", c.name, err, c.name, c.usage, c.name)
		return 2
	default:
		fmt.Fprintf(stderr, "bitdecode %s: %v\n", c.name, err)
		return 1
	}
}

func printTopUsage(w io.Writer) {
	fmt.Fprintf(w, "bitdecode %s: LLM inference with a low-bit (int8/int4/int2) KV cache that decodes faster than fp16.\n\n", version)
	fmt.Fprintf(w, "usage: bitdecode <command> [arguments]\n\ncommands:\n")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, commands[n].summary)
	}
	fmt.Fprintf(w, "\nRun 'bitdecode help <command>' for a command's flags and an example; 'bitdecode --version' for the version.\n")
}

func printHelp(w io.Writer, c *command) {
	fmt.Fprintf(w, "usage: bitdecode %s %s\n\n%s\n\n%s\n", c.name, c.usage, c.summary, strings.TrimSpace(c.help))
	if fs := c.flags(); fs != nil {
		fmt.Fprintf(w, "\nflags:\n")
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
}

// flags returns the command's flag set for help output (nil if it has none).
func (c *command) flags() *flag.FlagSet {
	if f, ok := flagSets[c.name]; ok {
		return f()
	}
	return nil
}

// flagSets builds each command's flags without parsing, for help.
var flagSets = map[string]func() *flag.FlagSet{}

// newFlagSet returns a flag set whose -h prints the command's full help.
func newFlagSet(c *command, stdout io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() { printHelp(stdout, c) }
	return fs
}

// parseFlags parses args, turning flag errors into usage errors and -h into
// the full help. During the parse fs prints nothing: fs.Parse would call
// fs.Usage for every error (the whole help for a mistyped flag) and print
// the error itself, which the usage error reports.
// parseInterspersed parses flags anywhere among the arguments, as most
// command-line tools do ('run "prompt" --max-tokens 20'); "--" ends the
// flags. fs.Args() then holds the other arguments in order.
func parseInterspersed(fs *flag.FlagSet, args []string) error {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		// Parse stops at the first argument that is not a flag, or after
		// "--" (then everything left is an argument).
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			positional = append(positional, rest...)
			break
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
	return fs.Parse(append([]string{"--"}, positional...))
}

func parseFlags(fs *flag.FlagSet, args []string) error {
	usage, out := fs.Usage, fs.Output()
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	err := parseInterspersed(fs, args)
	fs.Usage = usage
	fs.SetOutput(out)
	if errors.Is(err, flag.ErrHelp) {
		usage()
		return flag.ErrHelp
	}
	if err != nil {
		return usageErrorf("%v", err)
	}
	return nil
}

// startProfile starts a CPU profile of the whole command into the file
// $BITDECODE_CPUPROFILE names (for `go tool pprof`), if it names one: where
// the host's time goes, for instance between the GPU's steps. The returned
// function stops it.
func startProfile(lookup func(string) (string, bool)) (stop func(), err error) {
	path, ok := lookup("BITDECODE_CPUPROFILE")
	if !ok || path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("BITDECODE_CPUPROFILE: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("BITDECODE_CPUPROFILE: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
