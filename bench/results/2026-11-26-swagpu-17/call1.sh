#!/bin/bash
# swagpu, session 17: GPU tests of sliding windows in the paged GPU cache, then the
# non-windowed A/B of decode attention (base = main 2c65247, new = s17-swagpu), alternated.
set -o pipefail
ROOT=$PWD; G=$ROOT/.gpu-swagpu; R=$OUT/r; mkdir -p $R
cd $G && tar xJf b.tar.xz && chmod +x b/*
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; } > $R/times.txt
export BITDECODE_CACHE_DIR=$G/cache
tst() { local to=$1; shift; (cd $ROOT/$4 && timeout $to $G/b/$2 -test.v -test.timeout ${to}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) & }
for k in mma v1 wgmma; do tst 170 kwin-$k kernels.test "^TestGPUDecodeWindowMatchesReference\$/^$k\$" gpu/kernels; done
tst 170 kern2 kernels.test '^(TestGPUDecodeMatchesReference|TestGPUDecodeLong)$' gpu/kernels
tst 170 kv1 gpukv.test '^TestGPUTransformers$' kvcache/gpukv
tst 170 kv2 gpukv.test '^TestGPUSyntheticFamilies$' kvcache/gpukv
tst 170 kv3 gpukv.test '^(TestGPUCacheGolden|TestGPUCacheMatchesReference|TestGPUGraphReplaySameBits|TestGPUBatchInvariantLogits|TestGPUScheduler)$' kvcache/gpukv
wait; date -u >> $R/times.txt; snap
for i in 1 2; do
  for v in base new; do
    bin=b/bitdecode; [ $v = base ] && bin=b/bitdecode.base
    timeout 30 $bin bench attn --device cuda --kv int4 --grid 1x32K,32x8K > $R/ab-$v-$i.log 2>&1; echo "rc=$?" >> $R/ab-$v-$i.log
  done
done
date -u >> $R/times.txt; snap
