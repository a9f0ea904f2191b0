// bandwidth.cu: the memory-bandwidth probe behind `bitdecode inspect gpu`.
//
// Computes: nothing useful. Each thread XORs together every 16-byte word it
// reads from src[0, n16) and writes sink[0] only if the result equals a magic
// value (the buffer is zeroed, so it never does). The conditional store keeps
// the loads alive without adding write traffic, so the kernel's time is the
// time to stream n16*16 bytes from HBM: GB/s = bytes / time.
//
// Layout: src is a flat array of uint4 (16-byte words), n16 of them.
// Work split: a grid-stride loop; thread t of the grid reads words
// t, t+stride, t+2*stride, ... with stride = gridDim.x*blockDim.x, so each
// warp's loads are 512 contiguous, coalesced bytes. The Go side sizes the
// grid to fill every SM at full occupancy (cuOccupancyMaxActiveBlocks...).
//
// Instruction choices: 16-byte loads through the read-only path (__ldg on
// uint4 -> LDG.E.128.CONSTANT); kUnroll independent loads issued before the
// first use, so each thread keeps kUnroll requests in flight.
//
// Go wrapper and test: gpu/cuda/info.go (ProbeBandwidth),
// gpu/cuda/gpu_test.go (TestGPUBandwidthProbe).

constexpr int kThreads = 256;  // block size; must match probeBlockThreads in info.go
constexpr int kUnroll  = 8;    // loads in flight per thread

extern "C" __global__ void __launch_bounds__(kThreads)
read_bandwidth(const uint4* __restrict__ src, unsigned long long n16,
               unsigned int* __restrict__ sink) {
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int acc = 0;
    for (; i + (kUnroll - 1) * stride < n16; i += kUnroll * stride) {
        uint4 v[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) v[u] = __ldg(src + i + u * stride);
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    for (; i < n16; i += stride) {
        const uint4 v = __ldg(src + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x9e3779b9u) sink[0] = acc;
}
