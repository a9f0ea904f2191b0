#!/bin/bash
# s29-prefill call 1: prefill.cu v4 (MT = 2 m16 tiles a warp, Q and the
# low-bit code words staged in shared memory) beside main (0d125d16): one
# chunk's attention (BenchmarkPrefillAttention: v4's default MT, MT = 1,
# main), then the GPU tests (kernels and kvcache/gpukv) on v4.
exec > >(tee -a $OUT/call.log) 2>&1
date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
R=$PWD; P=$R/.gpu-pf29; W=/tmp/w; mkdir -p $W
for f in kernels.test kernels-main.test gpukv.test; do xz -dc $P/$f.xz > $W/$f; chmod +x $W/$f; done
export BITDECODE_CACHE_DIR=/tmp/bdc
cd $R/gpu/kernels
B='-test.run ^$ -test.bench PrefillAttention -test.benchtime 1x'
BITDECODE_PTXAS_VERBOSE=1 timeout 150 $W/kernels.test $B 2>$OUT/bench-ptxas.log | grep -v "^goos\|^goarch\|^pkg\|^cpu" | tee $OUT/bench-v4.txt
echo "bench v4 at $SECONDS s"
timeout 120 $W/kernels-main.test $B 2>&1 | grep -v "^goos\|^goarch\|^pkg\|^cpu" | tee $OUT/bench-main.txt
echo "bench main at $SECONDS s"
BITDECODE_PREFILL_MT=1 timeout 110 $W/kernels.test $B 2>&1 | grep -v "^goos\|^goarch\|^pkg\|^cpu" | tee $OUT/bench-mt1.txt
echo "bench mt1 at $SECONDS s"
KT='TestGPUPrefillMatchesReference/'
( BITDECODE_PTXAS_VERBOSE=1 timeout 200 $W/kernels.test -test.run "TestPrefillRoute|${KT}(fp16|bf16|int8|int4)\$" -test.v -test.timeout 210s > $OUT/k1.log 2>&1; echo "k1 rc $? at $SECONDS s" ) &
PIDS="$!"
( timeout 200 $W/kernels.test -test.run "${KT}(int4:kt128|int4:kt32:v32|int2|int2:kc32:v32|k8v4|k4v2|int4:kc64:res64)\$" -test.v -test.timeout 210s > $OUT/k2.log 2>&1; echo "k2 rc $? at $SECONDS s" ) &
PIDS="$PIDS $!"
cd $R/kvcache/gpukv
( timeout 200 $W/gpukv.test -test.run 'TestGPUCacheMatchesReference|TestGPUSoftcapPaged|TestGPUCacheBatchInvariant|TestGPURoPEAppendSameBits' -test.v -test.timeout 210s > $OUT/g1.log 2>&1; echo "g1 rc $? at $SECONDS s" ) &
PIDS="$PIDS $!"
( timeout 200 $W/gpukv.test -test.run 'TestGPUSyntheticFamilies|TestGPUTransformers' -test.v -test.timeout 210s > $OUT/g2.log 2>&1; echo "g2 rc $? at $SECONDS s" ) &
PIDS="$PIDS $!"
wait $PIDS
grep -h -- "^--- \|^ok\|^FAIL\|^PASS\|panic" $OUT/k1.log $OUT/k2.log $OUT/g1.log $OUT/g2.log | grep -v "^    " | head -60
echo "== ptxas (bench)"; grep -A4 "prefill.cu \[" $OUT/bench-ptxas.log | grep -E "prefill.cu|Used|spill" | paste - - - | sed 's/ptxas info    ://g; s/ptxas         ://g' | awk -F'\t' '{print $1, $2, $3}' | cut -c1-260
echo "end at $SECONDS s"
