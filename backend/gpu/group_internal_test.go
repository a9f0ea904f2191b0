package gpu

// A collective that never finishes must not hang its caller: rank 0 queues
// an all-reduce whose partner is never issued; its Sync must fail within the
// group's timeout naming the rank, abort the communicators and leave the
// group refusing work, and everything must still close.

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/gpu/cuda"
)

func TestGroupTimeoutAborts(t *testing.T) {
	have, err := cuda.DeviceCount()
	if err != nil || have < 2 {
		t.Skipf("needs 2 GPUs (%d, %v)", have, err)
	}
	if _, err := cuda.NCCLVersion(); err != nil {
		t.Skipf("no NCCL: %v", err)
	}
	o, err := ParseOptions(os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	const timeout = 3 * time.Second
	o.CollectiveTimeout = timeout
	ranks, comm, err := OpenGroup(2, o)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, b := range ranks {
			b.Close()
		}
	}()
	g := comm.(*group)
	x, err := ranks[0].Alloc(backend.F32, 1024)
	if err != nil {
		t.Fatal(err)
	}
	xt := x.(*tensor)
	// Rank 0 alone: its kernel waits for rank 1 forever.
	ranks[0].launch("AllReduce", func(c *cuda.Ctx) error {
		return c.AllReduceSumF32(g.comms[0], xt.ptr, xt.n, ranks[0].stream)
	})
	start := time.Now()
	err = ranks[0].Sync()
	took := time.Since(start)
	t.Logf("after %v: %v", took, err)
	if err == nil || !strings.Contains(err.Error(), "rank 0 of 2") || !strings.Contains(err.Error(), "did not finish within") {
		t.Fatalf("Sync of a rank whose all-reduce has no partner: err = %v, want a timeout naming rank 0", err)
	}
	if took > timeout+abortGrace {
		t.Errorf("the failure took %v; the timeout is %v", took, timeout)
	}
	y := []backend.Tensor{x, x}
	if err := comm.AllReduce(y); err == nil || !strings.Contains(err.Error(), "failed earlier") {
		t.Errorf("AllReduce after the failure: err = %v, want a refusal", err)
	}
	if err := ranks[1].Err(); err == nil {
		t.Errorf("rank 1 records no error after the group failed")
	}
	ranks[0].Free(x)
	done := make(chan error, 1)
	go func() { done <- comm.Close() }()
	select {
	case err := <-done:
		t.Logf("Close: %v", err)
	case <-time.After(2 * abortGrace):
		t.Fatal("Close of the failed group hangs")
	}
}
