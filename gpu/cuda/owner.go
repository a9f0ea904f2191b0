package cuda

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
)

// errCloseFromOwner is returned when Close is called from inside Do, which
// would otherwise wait for itself.
var errCloseFromOwner = errors.New("cuda: Close called from inside Do")

// owner runs functions on one goroutine locked to its OS thread. CUDA keeps
// the current context per OS thread, so the owner's setup makes the context
// current once and every later driver call runs here. It knows nothing of
// CUDA: setup and teardown are the seam through which Device plugs the
// driver in and tests plug in fakes.
type owner struct {
	work      chan *request
	quit      chan struct{}
	done      chan struct{} // closed when the loop has exited
	closeOnce sync.Once
	goid      uint64      // the owner goroutine's id, set before start returns
	busy      atomic.Bool // true while a function runs on the owner
}

// request is one function handed to the owner, and its outcome.
type request struct {
	f        func() error
	err      error
	panicked bool
	panicVal any
	done     chan struct{} // buffered(1): the owner signals completion
}

var requestPool = sync.Pool{New: func() any { return &request{done: make(chan struct{}, 1)} }}

// startOwner starts the owner goroutine, locks it to its thread and runs
// setup there. It returns setup's error, after which the goroutine is gone.
// teardown runs on the owner thread when Close is called.
func startOwner(setup func() error, teardown func()) (*owner, error) {
	o := &owner{
		work: make(chan *request),
		quit: make(chan struct{}),
		done: make(chan struct{}),
	}
	started := make(chan error, 1)
	go o.loop(setup, teardown, started)
	if err := <-started; err != nil {
		return nil, err
	}
	return o, nil
}

func (o *owner) loop(setup func() error, teardown func(), started chan<- error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer close(o.done)
	o.goid = curGoroutineID()
	if err := setup(); err != nil {
		started <- err
		return
	}
	started <- nil
	for {
		select {
		case r := <-o.work:
			o.run(r)
		case <-o.quit:
			if teardown != nil {
				teardown()
			}
			return
		}
	}
}

func (o *owner) run(r *request) {
	o.busy.Store(true)
	defer func() {
		o.busy.Store(false)
		if v := recover(); v != nil {
			r.panicked, r.panicVal = true, v
		}
		r.done <- struct{}{}
	}()
	r.err = r.f()
}

// onOwner reports whether the caller is the owner goroutine running a
// function. It is cheap when the owner is idle; when busy it reads the
// caller's goroutine id.
func (o *owner) onOwner() bool {
	return o.busy.Load() && curGoroutineID() == o.goid
}

// Do runs f on the owner thread and returns its error. Called from a
// function already running on the owner, it runs f inline. A panic in f is
// re-raised in the caller. After Close, Do returns ErrClosed.
func (o *owner) Do(f func() error) error {
	if o.onOwner() {
		return f()
	}
	r := requestPool.Get().(*request)
	r.f = f
	select {
	case o.work <- r:
	case <-o.done:
		r.f = nil
		requestPool.Put(r)
		return ErrClosed
	}
	<-r.done
	err, panicked, v := r.err, r.panicked, r.panicVal
	*r = request{done: r.done}
	requestPool.Put(r)
	if panicked {
		panic(v)
	}
	return err
}

// Close runs teardown on the owner thread and stops the owner. It waits for
// a running function to finish. Calling it again returns nil.
func (o *owner) Close() error {
	if o.onOwner() {
		return errCloseFromOwner
	}
	o.closeOnce.Do(func() { close(o.quit) })
	<-o.done
	return nil
}

// curGoroutineID parses the current goroutine's id from the first line of
// its stack trace, "goroutine 18 [running]:".
func curGoroutineID() uint64 {
	var buf [64]byte
	n := runtime.Stack(buf[:], false)
	b := buf[:n]
	const prefix = "goroutine "
	if len(b) < len(prefix) {
		return 0
	}
	b = b[len(prefix):]
	var id uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
	}
	return id
}
