package gpukv

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// legacyRounds is the plan before staging slots (session 30's Begin): round
// r takes each sequence's tokens of its r-th residual fill, all in its own
// slot, and packs the fills that reach Nr.
func legacyRounds(seqs []roundSeq, T, nr int) []roundPlan {
	n := 0
	for _, s := range seqs {
		if s.n > 0 {
			n = max(n, (s.pos+s.n-1)/nr-s.pos/nr+1)
		}
	}
	var out []roundPlan
	for r := range n {
		p := roundPlan{slot: make([]int32, T), row: make([]int32, T)}
		for i := range p.slot {
			p.slot[i] = -1
		}
		for _, s := range seqs {
			for j := range s.n {
				pos := s.pos + j
				if pos/nr-s.pos/nr != r {
					continue
				}
				p.slot[s.start+j], p.row[s.start+j] = int32(s.slot), int32(pos%nr)
				if pos%nr == nr-1 {
					p.src, p.dst = append(p.src, int32(s.slot)), append(p.dst, s.blocks[pos/nr])
				}
			}
		}
		out = append(out, p)
	}
	return out
}

// tag is what a residual row holds in simulateRounds: a sequence's token.
type tag struct{ seq, pos int }

// simulateRounds runs plan over a model of the residual slots and checks
// that every token is written once at its row, that every pack reads a
// slot holding exactly its block's Nr tokens, that every block the batch
// fills packs once, that no round uses more than stage staging slots, and
// that each sequence's own slot ends holding its tail (with its earlier
// tokens of that block).
func simulateRounds(t *testing.T, what string, seqs []roundSeq, plan []roundPlan, T, nr, stageBase, stage int) {
	t.Helper()
	slots := map[int][]tag{}
	get := func(s int) []tag {
		if slots[s] == nil {
			slots[s] = make([]tag, nr)
			for i := range slots[s] {
				slots[s][i] = tag{-1, -1}
			}
		}
		return slots[s]
	}
	for i, s := range seqs { // the own slot holds the open block's earlier tokens
		for pos := s.pos / nr * nr; pos < s.pos; pos++ {
			get(s.slot)[pos%nr] = tag{i, pos}
		}
	}
	written := make([]int, T)
	packed := map[int32]int{}
	for r, p := range plan {
		staging := map[int32]bool{}
		for i, s := range seqs {
			for j := range s.n {
				tk := s.start + j
				if p.slot[tk] < 0 {
					continue
				}
				written[tk]++
				if int(p.row[tk]) != (s.pos+j)%nr {
					t.Fatalf("%s: round %d: token %d (position %d) at row %d", what, r, tk, s.pos+j, p.row[tk])
				}
				if sl := int(p.slot[tk]); sl != s.slot && (sl < stageBase || sl >= stageBase+stage) {
					t.Fatalf("%s: round %d: token %d of sequence %d in slot %d, neither its own (%d) nor staging", what, r, tk, i, sl, s.slot)
				}
				get(int(p.slot[tk]))[p.row[tk]] = tag{i, s.pos + j}
			}
		}
		for k, src := range p.src {
			if int(src) >= stageBase {
				if staging[src] {
					t.Fatalf("%s: round %d packs staging slot %d twice", what, r, src)
				}
				staging[src] = true
			}
			rows := get(int(src))
			seq, b := rows[0].seq, rows[0].pos/nr
			for row, tg := range rows {
				if seq < 0 || tg.seq != seq || tg.pos != b*nr+row {
					t.Fatalf("%s: round %d packs slot %d into block %d, but row %d holds %+v (row 0: %+v)", what, r, src, p.dst[k], row, tg, rows[0])
				}
			}
			if p.dst[k] != seqs[seq].blocks[b] {
				t.Fatalf("%s: round %d packs sequence %d's block %d into pool block %d, not %d", what, r, seq, b, p.dst[k], seqs[seq].blocks[b])
			}
			packed[p.dst[k]]++
		}
		if len(staging) > stage {
			t.Fatalf("%s: round %d uses %d staging slots of %d", what, r, len(staging), stage)
		}
	}
	for tk, n := range written {
		if n != 1 {
			t.Fatalf("%s: token %d written %d times", what, tk, n)
		}
	}
	for i, s := range seqs {
		end := s.pos + s.n
		for b := s.pos / nr; (b+1)*nr <= end; b++ {
			if packed[s.blocks[b]] != 1 {
				t.Fatalf("%s: sequence %d's block %d packed %d times", what, i, b, packed[s.blocks[b]])
			}
		}
		if s.n == 0 || end%nr == 0 {
			continue
		}
		rows := get(s.slot)
		for row := range end % nr {
			if want := (tag{i, end/nr*nr + row}); rows[row] != want {
				t.Fatalf("%s: sequence %d's own slot row %d holds %+v at the end, want %+v", what, i, row, rows[row], want)
			}
		}
	}
}

// randomSeqs makes a batch of n sequences of the kinds a scheduler mixes:
// decode tokens, aligned chunks, chunks starting inside a block, empty.
func randomSeqs(rng *rand.Rand, n, nr int) ([]roundSeq, int) {
	var seqs []roundSeq
	T, next := 0, int32(1000)
	for i := range n {
		s := roundSeq{start: T, slot: i}
		switch rng.IntN(4) {
		case 0: // decode
			s.pos, s.n = rng.IntN(5*nr), 1
		case 1: // an aligned chunk
			s.pos, s.n = nr*rng.IntN(4), nr*(1+rng.IntN(4))-rng.IntN(2)*rng.IntN(nr)
		case 2: // a chunk starting inside a block
			s.pos, s.n = rng.IntN(4*nr), 1+rng.IntN(4*nr)
		case 3:
			s.pos = rng.IntN(3 * nr)
		}
		for range (s.pos+s.n)/nr + 1 {
			s.blocks = append(s.blocks, next)
			next++
		}
		seqs = append(seqs, s)
		T += s.n
	}
	return seqs, T
}

func TestPlanRounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 7))
	for _, nr := range []int{16, 128, 256} {
		for _, stage := range []int{0, 1, 2, 3, 16} {
			for trial := range 300 {
				seqs, T := randomSeqs(rng, 1+rng.IntN(6), nr)
				what := fmt.Sprintf("nr %d stage %d trial %d", nr, stage, trial)
				const stageBase = 100
				plan := planRounds(seqs, T, nr, stageBase, stage)
				simulateRounds(t, what, seqs, plan, T, nr, stageBase, stage)
				if stage == 0 && !plansEqual(plan, legacyRounds(seqs, T, nr)) {
					t.Fatalf("%s: without staging slots the plan differs from the one-slot rounds", what)
				}
			}
		}
	}
}

// TestPlanRoundsCounts checks the rounds the cases of rounds.go take.
func TestPlanRoundsCounts(t *testing.T) {
	const nr, base = 128, 8
	blocks := func(n int) []int32 {
		b := make([]int32, n)
		for i := range b {
			b[i] = int32(50 + i)
		}
		return b
	}
	cases := []struct {
		name         string
		seqs         []roundSeq
		stage, want  int
		wantPackRow0 int // packs in round 0
	}{
		{"decode step", []roundSeq{{0, 127, 1, 0, blocks(2)}, {1, 5, 1, 1, blocks(1)}, {2, 255, 1, 2, blocks(3)}}, 16, 1, 2},
		{"aligned 2048-token chunk", []roundSeq{{0, 1024, 2048, 0, blocks(25)}}, 16, 1, 16},
		{"aligned chunk with a tail", []roundSeq{{0, 0, 300, 0, blocks(3)}}, 16, 1, 2},
		{"aligned chunk beyond the staging slots", []roundSeq{{0, 0, 2048, 0, blocks(17)}}, 8, 2, 8},
		{"chunk starting inside a block", []roundSeq{{0, 100, 500, 0, blocks(5)}}, 16, 2, 4},
		{"chunk starting inside a block, ending on one", []roundSeq{{0, 100, 412, 0, blocks(5)}}, 16, 1, 4},
		{"legacy 2048-token chunk", []roundSeq{{0, 1024, 2048, 0, blocks(25)}}, 0, 16, 1},
	}
	for _, c := range cases {
		T := 0
		for _, s := range c.seqs {
			T += s.n
		}
		plan := planRounds(c.seqs, T, nr, base, c.stage)
		simulateRounds(t, c.name, c.seqs, plan, T, nr, base, c.stage)
		if len(plan) != c.want || len(plan[0].src) != c.wantPackRow0 {
			t.Errorf("%s: %d rounds, %d packs in round 0; want %d, %d", c.name, len(plan), len(plan[0].src), c.want, c.wantPackRow0)
		}
	}
	// A decode step's plan is the one-slot plan, bit for bit: decode
	// steps keep their launches (and their CUDA graphs' keys).
	seqs := cases[0].seqs
	if !plansEqual(planRounds(seqs, 3, nr, base, 16), legacyRounds(seqs, 3, nr)) {
		t.Error("a decode step's plan differs from the one-slot plan")
	}
}

func plansEqual(a, b []roundPlan) bool {
	return slices.EqualFunc(a, b, func(x, y roundPlan) bool {
		return slices.Equal(x.slot, y.slot) && slices.Equal(x.row, y.row) && slices.Equal(x.src, y.src) && slices.Equal(x.dst, y.dst)
	})
}
