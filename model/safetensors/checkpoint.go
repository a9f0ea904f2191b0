package safetensors

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/bitdecode/bitdecode/internal/fileio"
)

// The file names of a Hugging Face checkpoint directory.
const (
	SingleFileName = "model.safetensors"
	IndexFileName  = "model.safetensors.index.json"
)

// maxIndexSize bounds the index file read into memory (a real one is well
// under a megabyte even for thousands of tensors).
const maxIndexSize = 64 << 20

// Checkpoint is the set of tensors of a model: one file, or the shards named
// by an index. It is safe for concurrent reads.
type Checkpoint struct {
	files []*File          // open files, in the order opened
	where map[string]*File // tensor name -> file holding it
	names []string         // sorted
}

// OpenDir opens the checkpoint of a Hugging Face model directory: the shards
// listed by model.safetensors.index.json if present, model.safetensors
// otherwise.
func OpenDir(dir string) (*Checkpoint, error) {
	idx := filepath.Join(dir, IndexFileName)
	if _, err := os.Stat(idx); err == nil {
		return OpenIndex(idx)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, &Error{File: idx, Err: err}
	}
	single := filepath.Join(dir, SingleFileName)
	if _, err := os.Stat(single); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &Error{File: dir, Err: fmt.Errorf("no %s or %s in the directory", SingleFileName, IndexFileName)}
		}
		return nil, &Error{File: single, Err: err}
	}
	f, err := Open(single)
	if err != nil {
		return nil, err
	}
	return newCheckpoint([]*File{f}, nil), nil
}

// OpenFiles opens a checkpoint made of the given safetensors files; a
// tensor name found in two files is an error.
func OpenFiles(paths ...string) (*Checkpoint, error) {
	var files []*File
	closeAll := func() {
		for _, f := range files {
			_ = f.Close()
		}
	}
	where := make(map[string]*File)
	for _, p := range paths {
		f, err := Open(p)
		if err != nil {
			closeAll()
			return nil, err
		}
		files = append(files, f)
		for _, t := range f.Tensors() {
			if g, dup := where[t.Name]; dup {
				closeAll()
				return nil, &Error{File: p, Tensor: t.Name, Err: fmt.Errorf("also in %s", g.Path())}
			}
			where[t.Name] = f
		}
	}
	return newCheckpoint(files, where), nil
}

// NewCheckpoint makes a checkpoint of already open files (e.g. from
// OpenBytes, for weights embedded in a program); a tensor name found in two
// files is an error. Close closes the files.
func NewCheckpoint(files ...*File) (*Checkpoint, error) {
	where := make(map[string]*File)
	for _, f := range files {
		for _, t := range f.Tensors() {
			if g, dup := where[t.Name]; dup {
				return nil, &Error{File: f.Path(), Tensor: t.Name, Err: fmt.Errorf("also in %s", g.Path())}
			}
			where[t.Name] = f
		}
	}
	return newCheckpoint(files, where), nil
}

// index is the JSON of model.safetensors.index.json.
type index struct {
	Metadata  map[string]any    `json:"metadata"`
	WeightMap map[string]string `json:"weight_map"`
}

// OpenIndex opens a sharded checkpoint from its index file (normally
// model.safetensors.index.json). Shard names must be plain file names in the
// index's directory; every tensor the index names must be in its shard.
func OpenIndex(path string) (*Checkpoint, error) {
	raw, err := fileio.ReadFile(path, maxIndexSize)
	if err != nil {
		return nil, &Error{File: path, Err: err}
	}
	var ix index
	if err := json.Unmarshal(raw, &ix); err != nil {
		return nil, &Error{File: path, Err: fmt.Errorf("index: %w", err)}
	}
	if len(ix.WeightMap) == 0 {
		return nil, &Error{File: path, Err: errors.New("index: weight_map is missing or empty")}
	}
	dir := filepath.Dir(path)
	byShard := make(map[string]*File)
	var files []*File
	closeAll := func() {
		for _, f := range files {
			_ = f.Close()
		}
	}
	names := make([]string, 0, len(ix.WeightMap))
	for name := range ix.WeightMap {
		names = append(names, name)
	}
	slices.Sort(names)
	where := make(map[string]*File, len(names))
	for _, name := range names {
		shard := ix.WeightMap[name]
		if !validShardName(shard) {
			closeAll()
			return nil, &Error{File: path, Tensor: name, Err: fmt.Errorf("index: shard %q is not a file name in the checkpoint directory", shard)}
		}
		f, ok := byShard[shard]
		if !ok {
			f, err = Open(filepath.Join(dir, shard))
			if err != nil {
				closeAll()
				return nil, fmt.Errorf("safetensors: %s: shard for tensor %q: %w", path, name, err)
			}
			byShard[shard] = f
			files = append(files, f)
		}
		if _, ok := f.Info(name); !ok {
			closeAll()
			return nil, &Error{File: f.Path(), Tensor: name, Err: fmt.Errorf("listed in %s but not in this shard", filepath.Base(path))}
		}
		where[name] = f
	}
	return newCheckpoint(files, where), nil
}

// validShardName reports whether s is a plain file name: no directories, so
// an index cannot point outside its checkpoint directory.
func validShardName(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, `/\`) && filepath.Base(s) == s && !filepath.IsAbs(s)
}

// newCheckpoint builds a Checkpoint; where nil means every tensor of the
// (single) file.
func newCheckpoint(files []*File, where map[string]*File) *Checkpoint {
	if where == nil {
		where = make(map[string]*File)
		for _, f := range files {
			for _, t := range f.Tensors() {
				where[t.Name] = f
			}
		}
	}
	c := &Checkpoint{files: files, where: where}
	for name := range where {
		c.names = append(c.names, name)
	}
	slices.Sort(c.names)
	return c
}

// Names returns the names of all tensors, sorted. The caller must not modify
// the slice.
func (c *Checkpoint) Names() []string { return c.names }

// Info returns the description of the named tensor.
func (c *Checkpoint) Info(name string) (TensorInfo, bool) {
	f, ok := c.where[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.Info(name)
}

// Tensor returns the named tensor with a view of its bytes, valid until
// Close.
func (c *Checkpoint) Tensor(name string) (Tensor, error) {
	f, ok := c.where[name]
	if !ok {
		return Tensor{}, &Error{Tensor: name, Err: errors.New("not in checkpoint")}
	}
	return f.Tensor(name)
}

// Files returns the paths of the checkpoint's files.
func (c *Checkpoint) Files() []string {
	out := make([]string, len(c.files))
	for i, f := range c.files {
		out[i] = f.Path()
	}
	return out
}

// Mapped reports whether any file of the checkpoint is memory-mapped: then
// its tensor data becomes invalid at Close. Data of files read into memory
// (or opened with OpenBytes) stays valid while referenced.
func (c *Checkpoint) Mapped() bool {
	for _, f := range c.files {
		if f.Mapped() {
			return true
		}
	}
	return false
}

// Close closes all files of the checkpoint.
func (c *Checkpoint) Close() error {
	var errs []error
	for _, f := range c.files {
		if err := f.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
