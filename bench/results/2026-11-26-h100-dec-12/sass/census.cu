#include "bitdecode.cuh"
#include "dec.cu"
__global__ void __launch_bounds__(256, 2) census_p1(const dec::Args a) {
  __shared__ __align__(16) unsigned char smem[dec::fused_smem_bytes(256)];
  dec::fused_cta<dec::kInt4, 1, 256>(a, blockIdx.x, smem);
}
