package backend

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
)

// Device is a kind of backend a program links in: "cpu" (backend/cpu,
// always there) or "cuda" (backend/gpu). A backend package registers its
// device from init, so a program chooses its devices by what it imports and
// opens them by name; nothing above this layer names a concrete backend.
type Device struct {
	// Name is the name --device takes ("cpu", "cuda").
	Name string
	// Accelerator devices are what "auto" looks for before the CPU.
	Accelerator bool
	// Available returns nil if the device can run on this machine, else why
	// not (no driver, no GPU).
	Available func() error
	// Open returns a new backend on the device.
	Open func(o OpenOptions) (Backend, error)
	// Configure, when set, reads the device's settings from env (library
	// paths, kernel tuning) before anything probes the device; a bad value
	// is an error naming the variable (ConfigureDevices).
	Configure func(env func(name string) (string, bool)) error
	// OpenGroup, when set, opens n backends that run one model together
	// (tensor parallelism, backend/tp) and the communicator between them:
	// one per GPU for the cuda device. See OpenGroup.
	OpenGroup func(n int, o OpenOptions) ([]Backend, Communicator, error)
}

// ConfigureDevices hands every registered device its settings from env
// (the program's edge passes os.LookupEnv), before the first
// ResolveDevice: a GPU runtime must know where its libraries are before it
// looks for a driver.
func ConfigureDevices(env func(name string) (string, bool)) error {
	devicesMu.Lock()
	ds := slices.Clone(devices)
	devicesMu.Unlock()
	for _, d := range ds {
		if d.Configure != nil {
			if err := d.Configure(env); err != nil {
				return err
			}
		}
	}
	return nil
}

// OpenOptions configure a backend as it opens.
type OpenOptions struct {
	// Threads is the CPU backend's goroutines per op (0: GOMAXPROCS).
	Threads int
	// Ordinal is the GPU to use (0: the first).
	Ordinal int
	// Env looks settings up by environment-variable name (the program's
	// edge passes os.LookupEnv; nil: none). It is the only way tuning
	// variables (BITDECODE_*) reach a backend: library code reads no
	// environment of its own.
	Env func(name string) (value string, ok bool)
	// BatchInvariant asks for results of a row that do not depend on the
	// other rows of a batch (serving: a request's greedy text the same
	// alone and under load). The CUDA backend then runs every fp16 linear
	// layer through its batch-invariant kernel (or, as with its
	// BITDECODE_BATCH_INVARIANT variable, which also turns it on); the CPU
	// backend's ops are batch-invariant already.
	BatchInvariant bool
}

// Auto is the device choice that picks the first available accelerator and
// falls back to the CPU.
const Auto = "auto"

var (
	devicesMu sync.Mutex
	devices   []Device
)

// RegisterDevice makes a device available to OpenDevice. Registering a
// name twice panics: two packages claim one device.
func RegisterDevice(d Device) {
	devicesMu.Lock()
	defer devicesMu.Unlock()
	for _, e := range devices {
		if e.Name == d.Name {
			panic("backend: device " + d.Name + " registered twice")
		}
	}
	devices = append(devices, d)
}

// Devices returns the names of the registered devices, sorted.
func Devices() []string {
	devicesMu.Lock()
	defer devicesMu.Unlock()
	var names []string
	for _, d := range devices {
		names = append(names, d.Name)
	}
	slices.Sort(names)
	return names
}

// ErrUnknownDevice is returned (wrapped) for a device name no linked
// package registered.
var ErrUnknownDevice = errors.New("backend: unknown device")

// ResolveDevice turns a device choice into the name of a device that can
// run here. "auto" (or "") picks the first available accelerator, else
// "cpu", and then writes one line to log saying why no accelerator runs (an
// accelerator that is linked but unusable: no driver, no GPU). A named
// device that is not available is an error saying why and what to try.
func ResolveDevice(choice string, log io.Writer) (string, error) {
	devicesMu.Lock()
	ds := slices.Clone(devices)
	devicesMu.Unlock()
	if choice == "" || choice == Auto {
		var why []string
		for _, d := range ds {
			if !d.Accelerator {
				continue
			}
			err := d.Available()
			if err == nil {
				return d.Name, nil
			}
			why = append(why, err.Error())
		}
		if len(why) > 0 && log != nil {
			fmt.Fprintf(log, "bitdecode: no usable GPU (%s); running on the CPU\n", strings.Join(why, "; "))
		}
		return "cpu", nil
	}
	for _, d := range ds {
		if d.Name != choice {
			continue
		}
		if err := d.Available(); err != nil {
			return "", fmt.Errorf("--device %s: %w (try --device cpu)", choice, err)
		}
		return d.Name, nil
	}
	var names []string
	for _, d := range ds {
		names = append(names, d.Name)
	}
	return "", fmt.Errorf("%w %q: want auto or one of %s", ErrUnknownDevice, choice, strings.Join(names, ", "))
}

// OpenDevice resolves choice (ResolveDevice) and opens a backend on it. It
// returns the backend and the device's name.
func OpenDevice(choice string, o OpenOptions, log io.Writer) (Backend, string, error) {
	name, err := ResolveDevice(choice, log)
	if err != nil {
		return nil, "", err
	}
	be, err := registered(name).Open(o)
	if err != nil {
		return nil, "", fmt.Errorf("--device %s: %w (try --device cpu)", name, err)
	}
	return be, name, nil
}

// registered returns the registered device of a name ResolveDevice gave.
func registered(name string) Device {
	devicesMu.Lock()
	defer devicesMu.Unlock()
	for _, d := range devices {
		if d.Name == name {
			return d
		}
	}
	return Device{}
}

// DeviceAvailable returns nil if the named device is linked in and can run
// here, else why not.
func DeviceAvailable(name string) error {
	devicesMu.Lock()
	defer devicesMu.Unlock()
	for _, d := range devices {
		if d.Name == name {
			return d.Available()
		}
	}
	return fmt.Errorf("%w %q (not linked into this program)", ErrUnknownDevice, name)
}
