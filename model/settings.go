package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/bitdecode/bitdecode/internal/fileio"
)

// SettingsFile is the optional file of bitdecode's per-model inference
// settings, read from the checkpoint directory beside config.json.
const SettingsFile = "bitdecode.json"

// maxSettingsSize bounds the settings file read into memory.
const maxSettingsSize = 1 << 20

// Settings are inference settings measured for one model, which the CLI
// applies where a flag leaves them open: the adjustment terms of the
// bit-plane KV format (kv "bw"), picked by a sweep on the model, and the DEC
// tunings of 'bitdecode tune dec' (k_chunk and n_tb per linear-layer shape
// for each slowdown target, per weight format and device), which
// '--dec-k tuned:5%' reads.
//
// They come from DIR/bitdecode.json when present, else from a built-in
// table keyed by the checkpoint directory's name (for shared, read-only
// checkpoint directories such as the reference model's), else defaults.
//
//	{"bw": {"adj8": 112, "adj4": 2048, "source": "how they were measured"},
//	 "dec": {"int4": {"device": "...", "shapes": [{"n": 4096, "k": 4096, "base_us": 12.5,
//	          "picks": [{"slowdown_pct": 5, "k_chunk": 32, "n_tb": 16, ...}]}]}}}
type Settings struct {
	BW BWSettings `json:"bw"`
	// DEC holds DEC tunings by weight format (DECSettingsKey: "int4",
	// "int3"); nil without.
	DEC map[string]*DECTuning `json:"dec,omitempty"`
	// From says where the settings came from: the file's path, "built-in
	// (NAME)" or "defaults".
	From string `json:"-"`
}

// BWSettings are the bw format's per-model adjustment terms; -1 (or
// absent) leaves a term to the format's default.
type BWSettings struct {
	Adj8   int    `json:"adj8"`
	Adj4   int    `json:"adj4"`
	Source string `json:"source,omitempty"`
}

// builtinSettings holds the settings measured for known checkpoints, keyed
// by directory name. gocoder-23m: bench/results/2026-11-22-cpu-bw (sweep of
// uniform 8- and 4-bit reads, ctx 2048, lowest KL divergence vs fp16).
var builtinSettings = map[string]BWSettings{
	"gocoder-23m": {Adj8: 0x70, Adj4: 0x500, Source: "bench/results/2026-11-22-cpu-bw (adjustment sweep, lowest KLD vs fp16)"},
}

// LoadSettings returns the settings of the checkpoint in dir. A missing
// file is not an error; a malformed one is, naming the file and field.
func LoadSettings(dir string) (Settings, error) {
	path := filepath.Join(dir, SettingsFile)
	s := Settings{BW: BWSettings{Adj8: -1, Adj4: -1}, From: "defaults"}
	data, err := fileio.ReadFile(path, maxSettingsSize)
	if errors.Is(err, fs.ErrNotExist) {
		if b, ok := builtinSettings[filepath.Base(filepath.Clean(dir))]; ok {
			s.BW, s.From = b, fmt.Sprintf("built-in (%s)", filepath.Base(filepath.Clean(dir)))
		}
		return s, nil
	}
	if err != nil {
		return s, fmt.Errorf("model: settings: %w", err)
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return s, fmt.Errorf("model: settings %s: %w", path, err)
	}
	if s.BW.Adj8 < -1 || s.BW.Adj8 > 0xFF {
		return s, fmt.Errorf("model: settings %s: bw.adj8 = %d, want -1 or 0..255", path, s.BW.Adj8)
	}
	if s.BW.Adj4 < -1 || s.BW.Adj4 > 0xFFF {
		return s, fmt.Errorf("model: settings %s: bw.adj4 = %d, want -1 or 0..4095", path, s.BW.Adj4)
	}
	for key, t := range s.DEC {
		if err := t.validate(); err != nil {
			return s, fmt.Errorf("model: settings %s: dec.%s: %w", path, key, err)
		}
	}
	s.From = path
	return s, nil
}
