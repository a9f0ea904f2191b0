//go:build !(darwin || freebsd || linux || netbsd)

package cuda

import (
	"fmt"
	"runtime"
)

// errNoLoader is what every library load returns where purego has no dlopen
// (Windows among them): this build cannot reach CUDA there, but the CPU
// backend runs.
var errNoLoader = fmt.Errorf("the CUDA backend is not supported on %s in this build; use --device cpu", runtime.GOOS)

// dlopenNow fails: this platform has no dlopen in purego.
func dlopenNow(string) (uintptr, error) { return 0, errNoLoader }

// dlsym fails: no library ever opens here.
func dlsym(uintptr, string) (uintptr, error) { return 0, errNoLoader }
