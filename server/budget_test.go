package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestByteBudget: bytes within the budget are granted at once; a request
// that does not fit waits, and so does every later one (arrival order);
// a request larger than the budget takes all of it; a waiter whose context
// ends leaves the queue and lets the ones behind it through; every byte
// comes back.
func TestByteBudget(t *testing.T) {
	b := newByteBudget(100)
	ctx := context.Background()
	relA, err := b.acquire(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	granted := make(chan string, 4)
	wait := func(name string, ctx context.Context, n int64) {
		rel, err := b.acquire(ctx, n)
		if err != nil {
			granted <- name + " gave up"
			return
		}
		granted <- name
		time.Sleep(10 * time.Millisecond)
		rel()
	}
	queued := func(n int) { // waits until n requests wait
		for {
			b.mu.Lock()
			q := len(b.queue)
			b.mu.Unlock()
			if q == n {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	go wait("big", ctx, 1000) // capped at 100: waits for A
	queued(1)
	cctx, cancel := context.WithCancel(ctx)
	go wait("cancelled", cctx, 50)
	queued(2)
	go wait("small", ctx, 10) // fits beside A, but arrived after big
	queued(3)
	select {
	case g := <-granted:
		t.Fatalf("%s was granted while A holds 60 of 100 and big waits for all of it", g)
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	if g := <-granted; g != "cancelled gave up" {
		t.Fatalf("first event %q, want the cancelled waiter to give up", g)
	}
	relA()
	if g := <-granted; g != "big" {
		t.Fatalf("after A: %q granted, want big (first in line)", g)
	}
	if g := <-granted; g != "small" {
		t.Fatalf("after big: %q granted, want small", g)
	}
	var used int64
	var waiting int
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		b.mu.Lock()
		used, waiting = b.used, len(b.queue)
		b.mu.Unlock()
		if used == 0 {
			break
		}
	}
	if used != 0 || waiting != 0 || b.peakUsed() != 100 {
		t.Errorf("after all: %d bytes in use, %d waiting, peak %d; want 0, 0, 100", used, waiting, b.peakUsed())
	}
}

// TestParseBudget: requests parse within the server's budget (twice the
// body limit) however many arrive at once, each gets its answer, and the
// budget is whole again afterwards.
func TestParseBudget(t *testing.T) {
	ts := newTestServer(t, 40, 4) // 64 KiB body limit: a 128 KiB budget
	body := `{"model":"tiny","messages":[{"role":"user","content":"` + strings.Repeat("x", 60<<10) + `"}]}`
	var wg sync.WaitGroup
	for range 12 {
		wg.Go(func() {
			code, b := post(t, context.Background(), ts.url+"/v1/chat/completions", body)
			if _, _, ecode, _ := apiErr(t, b); code != 400 || ecode != "context_length_exceeded" {
				t.Errorf("status %d, %s", code, b)
			}
		})
	}
	wg.Wait()
	b := ts.srv.parsing
	b.mu.Lock()
	used := b.used
	b.mu.Unlock()
	if peak := b.peakUsed(); peak < int64(len(body)) || peak > 128<<10 || used != 0 {
		t.Errorf("peak %d bytes parsed at once (budget %d), %d in use after", peak, 128<<10, used)
	}
}

// TestParseBudgetPanic: a parse that panics (net/http recovers handlers'
// panics) gives its bytes back; a leak would starve every later request.
func TestParseBudgetPanic(t *testing.T) {
	ts := newTestServer(t, 40, 4)
	req := httptest.NewRequest(http.MethodPost, "/v1/completions", strings.NewReader(`{"model":"tiny","prompt":"a"}`))
	req.Header.Set("Content-Type", "application/json")
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the parse's panic did not reach the handler's caller")
			}
		}()
		ts.srv.handle(httptest.NewRecorder(), req, func([]byte) (*job, *apiError) { panic("parse failed") }, false)
	}()
	b := ts.srv.parsing
	b.mu.Lock()
	used := b.used
	b.mu.Unlock()
	if used != 0 {
		t.Errorf("%d bytes of the budget still taken after the panic", used)
	}
}
