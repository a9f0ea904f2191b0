//go:build darwin || freebsd || linux || netbsd

package cuda

import "github.com/ebitengine/purego"

// dlopenNow opens a shared library with every symbol bound at once and
// visible to libraries loaded later (dlopen RTLD_NOW|RTLD_GLOBAL).
func dlopenNow(name string) (uintptr, error) {
	return purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_GLOBAL)
}

// dlsym returns the address of symbol name in an opened library.
func dlsym(handle uintptr, name string) (uintptr, error) {
	return purego.Dlsym(handle, name)
}
