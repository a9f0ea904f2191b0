//go:build !amd64 || purego

package cpu

import "unsafe"

func int4VNNI_1x1(xq *int8, sx *float32, xsum *float32, w unsafe.Pointer, ws uintptr, rowBytes int, dst *float32, pz *float32, ps uintptr) {
	panic("cpu: no SIMD kernels in this build")
}

func int4VNNI_1x4(xq *int8, sx *float32, xsum *float32, w unsafe.Pointer, ws uintptr, rowBytes int, dst *float32, pz *float32, ps uintptr) {
	panic("cpu: no SIMD kernels in this build")
}

func int4VNNI_4x4(xq *int8, xs uintptr, sx *float32, xsum *float32, ss uintptr, w unsafe.Pointer, ws uintptr, groups int, dst *float32, ds uintptr, pz *float32, ps uintptr) {
	panic("cpu: no SIMD kernels in this build")
}

func int4AVX2_1x1(xq *int8, sx *float32, xsum *float32, w unsafe.Pointer, ws uintptr, rowBytes int, dst *float32, pz *float32, ps uintptr) {
	panic("cpu: no SIMD kernels in this build")
}

func int4QuantXAVX512(x *float32, xq *int8, sx *float32, cs *int32, groups int) {
	panic("cpu: no SIMD kernels in this build")
}

func int3VNNI_1x1(xq *int8, sx *float32, xsum *float32, w unsafe.Pointer, ws uintptr, rowBytes int, dst *float32, pz *float32, ps uintptr) {
	panic("cpu: no SIMD kernels in this build")
}

func int3VNNI_1x4(xq *int8, sx *float32, xsum *float32, w unsafe.Pointer, ws uintptr, rowBytes int, dst *float32, pz *float32, ps uintptr) {
	panic("cpu: no SIMD kernels in this build")
}

func int3QuantXVBMI(x *float32, xq *int8, sxw *float32, cs *int32, chunks int) {
	panic("cpu: no SIMD kernels in this build")
}

func int8VNNI_1x1(xq *int8, sx *float32, xsum *float32, w unsafe.Pointer, ws uintptr, rowBytes int, dst *float32, pz *float32, ps uintptr) {
	panic("cpu: no SIMD kernels in this build")
}

func int8VNNI_1x4(xq *int8, sx *float32, xsum *float32, w unsafe.Pointer, ws uintptr, rowBytes int, dst *float32, pz *float32, ps uintptr) {
	panic("cpu: no SIMD kernels in this build")
}

func int8VNNI_4x4(xq *int8, xs uintptr, sx *float32, xsum *float32, ss uintptr, w unsafe.Pointer, ws uintptr, groups int, dst *float32, ds uintptr, pz *float32, ps uintptr) {
	panic("cpu: no SIMD kernels in this build")
}
