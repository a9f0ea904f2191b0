package main

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/bitdecode/bitdecode/backend"
	_ "github.com/bitdecode/bitdecode/kvcache/gpukv" // the "cuda" device and its KV caches
)

// lookupEnv is the one place bitdecode reads its environment: the tuning
// variables (BITDECODE_*, docs/gpu.md) reach the libraries through
// engine.Options.Env and the bench configs, never through os.Getenv of
// their own.
func lookupEnv(name string) (string, bool) { return os.LookupEnv(name) }

// needGPU returns why a command that only runs on a GPU cannot run here
// (nil if it can); what names the command.
func needGPU(what string) error {
	if err := backend.DeviceAvailable("cuda"); err != nil {
		return fmt.Errorf("%s runs on a GPU: %w", what, err)
	}
	return nil
}

// checkDevice returns a usage error unless --device names a device choice.
func checkDevice(device string) error {
	if device != backend.Auto && !slices.Contains(backend.Devices(), device) {
		return usageErrorf("--device %q: want auto, %s", device, strings.Join(backend.Devices(), " or "))
	}
	return nil
}
