//go:build !arm64 || purego

package cpu

import "unsafe"

func int4SDOT_1x1(xq *int8, sx *float32, xsum *float32, w unsafe.Pointer, ws uintptr, rowBytes int, dst *float32, pz *float32, ps uintptr) {
	panic("cpu: no SDOT kernels in this build")
}
