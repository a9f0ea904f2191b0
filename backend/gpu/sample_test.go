package gpu_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/model"
)

// TestArgmaxRowsBackend checks backend.Argmaxer on the CUDA backend against
// model.Argmax: rows with ties, NaNs (one first), ±Inf and ±0 at a vocabulary
// that is not a multiple of 4 and at Llama-3's, the tokens downloaded into
// poisoned slices, twice (the second flush may replay a graph of the first).
func TestArgmaxRowsBackend(t *testing.T) {
	b := gpuBackend(t)
	defer b.Sync()
	r := rand.New(rand.NewPCG(5, 8))
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, sh := range [][2]int{{1, 7}, {9, 1003}, {55, 128256}} {
		R, V := sh[0], sh[1]
		host := make([]float32, R*V)
		for i := range host {
			host[i] = float32(r.NormFloat64())
		}
		for i := range R {
			row := host[i*V : (i+1)*V]
			switch i % 5 {
			case 1:
				for j := range row {
					row[j] = float32(r.IntN(3))
				}
			case 2:
				row[0] = nan
				row[r.IntN(V)] = inf
			case 3:
				row[r.IntN(V)] = nan
				row[r.IntN(V)] = inf
				row[r.IntN(V)] = inf
			case 4:
				for j := range row {
					row[j] = -float32(math.Abs(float64(row[j])))
				}
				row[r.IntN(V)] = math.Float32frombits(1 << 31)
				row[r.IntN(V)] = 0
			}
		}
		src, err := b.Alloc(backend.F32, R, V)
		if err != nil {
			t.Fatal(err)
		}
		dst, err := b.Alloc(backend.I32, R)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Upload(src, host); err != nil {
			t.Fatal(err)
		}
		for run := range 2 {
			b.ArgmaxRows(dst, src)
			got := make([]int32, R)
			for i := range got {
				got[i] = -3
			}
			if err := b.DownloadInt32(got, dst); err != nil {
				t.Fatal(err)
			}
			for i := range R {
				if want := model.Argmax(host[i*V : (i+1)*V]); int(got[i]) != want {
					t.Fatalf("[%d, %d] run %d: row %d argmax %d, want %d", R, V, run, i, got[i], want)
				}
			}
		}
		b.Free(src)
		b.Free(dst)
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
}

// TestArgmaxRowsErrors checks that ArgmaxRows records a shape or type
// error as an op error and that DownloadInt32 checks its tensor.
func TestArgmaxRowsErrors(t *testing.T) {
	b := gpuBackend(t)
	defer b.Sync()
	mk := func(dt backend.DType, shape ...int) backend.Tensor {
		x, err := b.Alloc(dt, shape...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Free(x) })
		return x
	}
	src, f32, wrong := mk(backend.F32, 3, 10), mk(backend.F32, 3), mk(backend.I32, 4)
	for _, c := range []struct {
		name     string
		dst, src backend.Tensor
		want     string
	}{
		{"dst F32", f32, src, "I32"},
		{"dst of 4 rows", wrong, src, "3 rows"},
		{"src I32", wrong, wrong, "F32"},
	} {
		b.ArgmaxRows(c.dst, c.src)
		err := b.Sync()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want one naming %q", c.name, err, c.want)
		}
	}
	if err := b.DownloadInt32(make([]int32, 3), f32); err == nil {
		t.Error("DownloadInt32 of an F32 tensor: no error")
	}
	if err := b.DownloadInt32(make([]int32, 5), wrong); err == nil {
		t.Error("DownloadInt32 of 4 values into 5: no error")
	}
}

// TestForwardGreedyTokens runs decode steps of a random model on the GPU
// with every row's logits downloaded, and again from the same cache
// contents with some sequences asking for their greedy token alone
// (model.OutputToken): the tokens must be model.Argmax of the full rows,
// and the rows still downloaded bitwise the full path's.
func TestForwardGreedyTokens(t *testing.T) {
	b := gpuBackend(t)
	cfg, err := model.ParseConfig([]byte(`{"architectures": ["LlamaForCausalLM"], "model_type": "llama",
		"hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
		"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
		"vocab_size": 10007, "max_position_embeddings": 4096, "rms_norm_eps": 1e-5,
		"rope_theta": 10000.0, "tie_word_embeddings": false}`))
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.NewRandom(cfg, b, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	const seqs, prompt, steps = 6, 20, 4
	r := rand.New(rand.NewPCG(1, 1))
	prompts := make([][]int32, seqs)
	for i := range prompts {
		for range prompt {
			prompts[i] = append(prompts[i], int32(r.IntN(cfg.Vocab)))
		}
	}
	// run feeds the prompts, then steps greedy tokens, asking for out(step,
	// seq) of each sequence's row; it returns every step's Logits.
	run := func(out func(step, seq int) model.Output) []*model.Logits {
		c := model.NewDenseCache(b, cfg)
		var all []*model.Logits
		next := make([]int32, seqs)
		for step := range steps + 1 {
			var bt model.Batch
			for s := range seqs {
				if step == 0 {
					bt.Add(s, 0, prompts[s]...)
				} else {
					bt.Add(s, prompt+step-1, next[s])
				}
				bt.Seqs[s].Output = out(step, s)
			}
			lg, err := m.Forward(&bt, c)
			if err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			for s := range seqs {
				next[s] = int32(lg.Token(s))
			}
			all = append(all, lg)
		}
		return all
	}
	full := run(func(int, int) model.Output { return model.OutputLogits })
	mixed := run(func(step, s int) model.Output {
		if step == 2 || (step+s)%3 != 0 {
			return model.OutputToken // step 2: every row a token
		}
		return model.OutputLogits
	})
	for step := range full {
		f, g := full[step], mixed[step]
		if g.Tokens == nil || f.Tokens != nil {
			t.Fatalf("step %d: tokens from the device %v (mixed), %v (full)", step, g.Tokens != nil, f.Tokens != nil)
		}
		for s := range seqs {
			if want := model.Argmax(f.Row(s)); g.Token(s) != want {
				t.Fatalf("step %d, sequence %d: token %d on the device, %d from the full row", step, s, g.Token(s), want)
			}
			row := g.Row(s)
			if (row == nil) != (step == 2 || (step+s)%3 != 0) {
				t.Fatalf("step %d, sequence %d: row present %v", step, s, row != nil)
			}
			for v := range row {
				if math.Float32bits(row[v]) != math.Float32bits(f.Row(s)[v]) {
					t.Fatalf("step %d, sequence %d: logit %d = %g with tokens beside it, %g alone", step, s, v, row[v], f.Row(s)[v])
				}
			}
		}
	}
}
