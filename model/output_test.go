package model

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/backend/cpu"
)

// argmaxCPU is the CPU backend with backend.Argmaxer (Argmax on its host
// tensors), so that Forward's device path (tokens picked by the backend,
// only the rows wanted whole gathered and downloaded) runs in CI.
type argmaxCPU struct {
	*cpu.Backend
	tokens map[backend.Tensor][]int32
	calls  int
}

func (b *argmaxCPU) ArgmaxRows(dst, src backend.Tensor) {
	x, err := b.Float32s(src)
	if err != nil {
		panic(err)
	}
	R, V := backend.Matrix(src.Shape())
	if n := backend.NumElements(dst.Shape()); n != R || dst.DType() != backend.I32 {
		panic("argmaxCPU: bad dst")
	}
	t := make([]int32, R)
	for i := range t {
		t[i] = int32(Argmax(x[i*V : (i+1)*V]))
	}
	b.tokens[dst] = t
	b.calls++
}

func (b *argmaxCPU) DownloadInt32(dst []int32, src backend.Tensor) error {
	t, ok := b.tokens[src]
	if !ok || len(t) != len(dst) {
		panic("argmaxCPU: DownloadInt32 of a tensor ArgmaxRows did not write")
	}
	copy(dst, t)
	return nil
}

// outputConfig is a small random model with a vocabulary that is a
// multiple of nothing useful.
const outputConfig = `{"architectures":["LlamaForCausalLM"],"model_type":"llama",
	"hidden_size":64,"intermediate_size":96,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,
	"head_dim":16,"vocab_size":1009,"max_position_embeddings":512,"rms_norm_eps":1e-5,"rope_theta":10000.0,
	"tie_word_embeddings":false}`

// TestForwardOutputs runs the same batches (prefills of several tokens,
// then decode steps) with every row whole and with some sequences asking
// for their token alone (Seq.Output), on a backend that picks tokens
// (argmaxCPU) and on one that does not (the fallback: the whole tensor
// downloaded, Token picking on the host): the tokens are Argmax of the
// whole rows, the rows that are there bitwise the same.
func TestForwardOutputs(t *testing.T) {
	cfg, err := ParseConfig([]byte(outputConfig))
	if err != nil {
		t.Fatal(err)
	}
	for _, withArgmax := range []bool{true, false} {
		var be backend.Backend = cpu.New(1)
		fake := &argmaxCPU{Backend: be.(*cpu.Backend), tokens: map[backend.Tensor][]int32{}}
		if withArgmax {
			be = fake
		}
		m, err := NewRandom(cfg, be, 7)
		if err != nil {
			t.Fatal(err)
		}
		const seqs = 5
		r := rand.New(rand.NewPCG(3, 4))
		var prompts [seqs][]int32
		for s := range prompts {
			for range 1 + 3*s {
				prompts[s] = append(prompts[s], int32(r.IntN(cfg.Vocab)))
			}
		}
		wantToken := func(step, s int) bool { return step == 1 || (step+s)%2 == 0 }
		run := func(out func(step, s int) Output) []*Logits {
			c := NewDenseCache(be, cfg)
			var all []*Logits
			var pos, next [seqs]int
			for step := range 4 {
				var b Batch
				for s := range seqs {
					if step == 0 {
						b.Add(s, 0, prompts[s]...)
					} else {
						b.Add(s, pos[s], int32(next[s]))
					}
					b.Seqs[s].Output = out(step, s)
					pos[s] += b.Seqs[s].Len
				}
				lg, err := m.Forward(&b, c)
				if err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
				if lg.Rows() != seqs {
					t.Fatalf("step %d: %d rows, want %d", step, lg.Rows(), seqs)
				}
				for s := range seqs {
					next[s] = lg.Token(s)
				}
				all = append(all, lg)
			}
			return all
		}
		fake.calls = 0
		full := run(func(int, int) Output { return OutputLogits })
		if fake.calls != 0 {
			t.Fatalf("argmax %v: ArgmaxRows ran %d times with every row wanted whole", withArgmax, fake.calls)
		}
		mixed := run(func(step, s int) Output {
			if wantToken(step, s) {
				return OutputToken
			}
			return OutputLogits
		})
		if withArgmax && fake.calls != len(mixed) {
			t.Fatalf("ArgmaxRows ran %d times in %d steps", fake.calls, len(mixed))
		}
		for step := range full {
			f, g := full[step], mixed[step]
			if (g.Tokens != nil) != withArgmax || f.Tokens != nil {
				t.Fatalf("argmax %v, step %d: device tokens %v (mixed), %v (whole)", withArgmax, step, g.Tokens != nil, f.Tokens != nil)
			}
			for s := range seqs {
				if want := Argmax(f.Row(s)); g.Token(s) != want || f.Token(s) != want {
					t.Fatalf("argmax %v, step %d, sequence %d: tokens %d (mixed), %d (whole), want %d", withArgmax, step, s, g.Token(s), f.Token(s), want)
				}
				row := g.Row(s)
				if withArgmax && (row == nil) != wantToken(step, s) {
					t.Fatalf("step %d, sequence %d: row downloaded %v, asked for the token alone %v", step, s, row != nil, wantToken(step, s))
				}
				if !withArgmax && row == nil {
					t.Fatalf("fallback, step %d, sequence %d: no row", step, s)
				}
				for v := range row {
					if math.Float32bits(row[v]) != math.Float32bits(f.Row(s)[v]) {
						t.Fatalf("argmax %v, step %d, sequence %d: logit %d = %g, %g with every row whole", withArgmax, step, s, v, row[v], f.Row(s)[v])
					}
				}
			}
		}
		// AllLogits: every row whole whatever Output says.
		var b Batch
		b.Add(0, 0, prompts[4]...)
		b.Seqs[0].Output = OutputToken
		b.AllLogits = true
		lg, err := m.Forward(&b, NewDenseCache(be, cfg))
		if err != nil {
			t.Fatal(err)
		}
		if lg.Rows() != len(prompts[4]) || lg.Tokens != nil || lg.Row(len(prompts[4])-1) == nil {
			t.Fatalf("AllLogits with OutputToken: %d rows (want %d), tokens %v", lg.Rows(), len(prompts[4]), lg.Tokens)
		}
		m.Close()
	}
}

// TestBatchValidateOutput checks that an unknown Output is refused.
func TestBatchValidateOutput(t *testing.T) {
	var b Batch
	b.Add(0, 0, 1, 2)
	b.Seqs[0].Output = OutputToken + 1
	if err := b.Validate(10); err == nil || !strings.Contains(err.Error(), "output") {
		t.Fatalf("Validate of output %d: %v", b.Seqs[0].Output, err)
	}
}

// TestLogitsRows checks Row, Rows and Token on a Logits with rows left on
// the device.
func TestLogitsRows(t *testing.T) {
	l := &Logits{Vocab: 3, Data: []float32{1, 5, 2, 7, 0, 0}, Tokens: []int32{2, 1, 0}, rowOf: []int32{-1, 0, 1}}
	if l.Rows() != 3 || l.Row(0) != nil || l.Row(1)[1] != 5 || l.Row(2)[0] != 7 {
		t.Fatalf("Rows %d, Row(0) %v, Row(1) %v, Row(2) %v", l.Rows(), l.Row(0), l.Row(1), l.Row(2))
	}
	for i, want := range []int{2, 1, 0} {
		if l.Token(i) != want {
			t.Errorf("Token(%d) = %d, want %d", i, l.Token(i), want)
		}
	}
	whole := &Logits{Vocab: 2, Data: []float32{float32(math.NaN()), 1, 3, 3}}
	if whole.Rows() != 2 || whole.Token(0) != 0 || whole.Token(1) != 0 {
		t.Fatalf("whole: Rows %d, tokens %d %d, want 2, 0 (NaN first), 0 (first of equal)", whole.Rows(), whole.Token(0), whole.Token(1))
	}
}

// chunkCPU is the CPU backend recording backend.ChunkRows calls.
type chunkCPU struct {
	*cpu.Backend
	calls [][]int // T, then each run's Start and Len
}

func (c *chunkCPU) SetChunkRows(T int, runs []backend.RowRun) {
	call := []int{T}
	for _, r := range runs {
		call = append(call, r.Start, r.Len)
	}
	c.calls = append(c.calls, call)
}

// TestForwardChunkRows: Forward names its batch's prefill chunks (the rows of
// each sequence that brings more than one token, Batch.ChunkRuns) to a
// backend that takes them, before its ops, and clears them when done.
func TestForwardChunkRows(t *testing.T) {
	cfg, err := ParseConfig([]byte(outputConfig))
	if err != nil {
		t.Fatal(err)
	}
	be := &chunkCPU{Backend: cpu.New(1)}
	m, err := NewRandom(cfg, be, 7)
	if err != nil {
		t.Fatal(err)
	}
	var b Batch
	b.Add(0, 0, 5, 6, 7) // rows 0-2: a chunk
	b.Add(1, 0, 9)       // row 3: one token
	b.Add(2, 0, 1, 2)    // rows 4-5: a chunk
	if _, err := m.Forward(&b, NewDenseCache(be, cfg)); err != nil {
		t.Fatal(err)
	}
	want := [][]int{{6, 0, 3, 4, 2}, {0}}
	if !slices.EqualFunc(be.calls, want, slices.Equal[[]int]) {
		t.Errorf("SetChunkRows calls %v, want %v", be.calls, want)
	}
}
