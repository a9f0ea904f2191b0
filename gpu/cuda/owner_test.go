//go:build linux

// The owner tests name OS threads by gettid, which is Linux's (and CUDA
// runs on Linux only).

package cuda

import (
	"errors"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

// fakeThreadState stands in for a CUDA context: setup records the owner's
// OS thread, as cuCtxSetCurrent binds the context to it.
type fakeThreadState struct {
	tid       atomic.Int64
	tornDown  atomic.Bool
	teardownT atomic.Int64
}

func (f *fakeThreadState) setup() error {
	f.tid.Store(int64(syscall.Gettid()))
	return nil
}

func (f *fakeThreadState) teardown() {
	f.teardownT.Store(int64(syscall.Gettid()))
	f.tornDown.Store(true)
}

func TestOwnerRunsEverythingOnOneThread(t *testing.T) {
	fs := &fakeThreadState{}
	o, err := startOwner(fs.setup, fs.teardown)
	if err != nil {
		t.Fatal(err)
	}
	const goroutines, calls = 16, 200
	var wrongThread, count atomic.Int64
	counter := 0 // touched only on the owner: the race detector checks that
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < calls; i++ {
				err := o.Do(func() error {
					if int64(syscall.Gettid()) != fs.tid.Load() {
						wrongThread.Add(1)
					}
					counter++
					count.Add(1)
					return nil
				})
				if err != nil {
					t.Errorf("Do: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := wrongThread.Load(); n != 0 {
		t.Errorf("%d calls ran off the owner thread", n)
	}
	var final int
	o.Do(func() error { final = counter; return nil })
	if final != goroutines*calls || count.Load() != goroutines*calls {
		t.Errorf("counter = %d (atomic %d), want %d", final, count.Load(), goroutines*calls)
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if !fs.tornDown.Load() || fs.teardownT.Load() != fs.tid.Load() {
		t.Errorf("teardown ran=%v on thread %d, want owner thread %d", fs.tornDown.Load(), fs.teardownT.Load(), fs.tid.Load())
	}
}

func TestOwnerReturnsErrors(t *testing.T) {
	fs := &fakeThreadState{}
	o, err := startOwner(fs.setup, fs.teardown)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	want := errors.New("boom")
	if got := o.Do(func() error { return want }); got != want {
		t.Errorf("Do = %v, want %v", got, want)
	}
}

func TestOwnerReentrantDoRunsInline(t *testing.T) {
	fs := &fakeThreadState{}
	o, err := startOwner(fs.setup, fs.teardown)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	depth := 0
	err = o.Do(func() error {
		return o.Do(func() error {
			return o.Do(func() error {
				depth = 3
				if int64(syscall.Gettid()) != fs.tid.Load() {
					return errors.New("inner call off the owner thread")
				}
				return nil
			})
		})
	})
	if err != nil || depth != 3 {
		t.Errorf("nested Do: err=%v depth=%d", err, depth)
	}
	// Close from inside Do must refuse rather than deadlock.
	if err := o.Do(func() error { return o.Close() }); !errors.Is(err, errCloseFromOwner) {
		t.Errorf("Close inside Do = %v, want errCloseFromOwner", err)
	}
}

func TestOwnerPanicPropagates(t *testing.T) {
	fs := &fakeThreadState{}
	o, err := startOwner(fs.setup, fs.teardown)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	func() {
		defer func() {
			if v := recover(); v != "kaboom" {
				t.Errorf("recovered %v, want kaboom", v)
			}
		}()
		o.Do(func() error { panic("kaboom") })
	}()
	// The owner survives a panic.
	if err := o.Do(func() error { return nil }); err != nil {
		t.Errorf("Do after panic: %v", err)
	}
}

func TestOwnerClose(t *testing.T) {
	fs := &fakeThreadState{}
	o, err := startOwner(fs.setup, fs.teardown)
	if err != nil {
		t.Fatal(err)
	}
	// Close while other goroutines keep calling: each call either runs or
	// gets ErrClosed, and none hangs.
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				if err := o.Do(func() error { return nil }); err != nil && !errors.Is(err, ErrClosed) {
					t.Errorf("Do: %v", err)
				}
			}
		}()
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := o.Do(func() error { return nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("Do after Close = %v, want ErrClosed", err)
	}
	if err := o.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

func TestOwnerSetupError(t *testing.T) {
	want := errors.New("no context")
	o, err := startOwner(func() error { return want }, func() { t.Error("teardown after failed setup") })
	if err != want || o != nil {
		t.Errorf("startOwner = %v, %v; want nil, %v", o, err, want)
	}
}

func TestCurGoroutineID(t *testing.T) {
	a := curGoroutineID()
	if a == 0 {
		t.Fatal("curGoroutineID = 0")
	}
	if b := curGoroutineID(); b != a {
		t.Errorf("same goroutine: %d then %d", a, b)
	}
	ch := make(chan uint64)
	go func() { ch <- curGoroutineID() }()
	if b := <-ch; b == a || b == 0 {
		t.Errorf("other goroutine got id %d (this one %d)", b, a)
	}
}
