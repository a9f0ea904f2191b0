#!/bin/bash
# s29-prefill call 3: prefill.cu v4 (MT by launch, KS = 2) beside main
# (0d125d16) on one H100: one chunk's attention (BenchmarkPrefillAttention,
# both binaries), then every GPU test on v4.
exec > >(tee -a $OUT/call.log) 2>&1
date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
R=$PWD; P=$R/.gpu-pf29; W=/tmp/w; mkdir -p $W
for f in kernels.test kernels-main.test gpukv.test; do xz -dc $P/$f.xz > $W/$f; chmod +x $W/$f; done
export BITDECODE_CACHE_DIR=/tmp/bdc
cd $R/gpu/kernels
B='-test.run ^$ -test.bench PrefillAttention -test.benchtime 1x'
F='grep -v ^goos\|^goarch\|^pkg\|^cpu\|^gpu/kernels:'
BITDECODE_PTXAS_VERBOSE=1 timeout 120 $W/kernels.test $B 2>$OUT/bench-ptxas.log | $F | tee $OUT/bench-v4.txt
echo "bench v4 at $SECONDS s"
timeout 100 $W/kernels-main.test $B 2>&1 | $F | tee $OUT/bench-main.txt
echo "bench main at $SECONDS s"
KT='TestGPUPrefillMatchesReference/'
( timeout 250 $W/kernels.test -test.run "TestPrefillRoute|TestPrefillLaunchMT|${KT}(fp16|bf16|int8|int4)\$" -test.v -test.timeout 260s > $OUT/k1.log 2>&1; echo "k1 rc $? at $SECONDS s" ) &
PIDS="$!"
( timeout 250 $W/kernels.test -test.run "${KT}(int4:kt128|int4:kt32:v32|int2|int2:kc32:v32|k8v4|k4v2|int4:kc64:res64)\$" -test.v -test.timeout 260s > $OUT/k2.log 2>&1; echo "k2 rc $? at $SECONDS s" ) &
PIDS="$PIDS $!"
cd $R/kvcache/gpukv
( timeout 250 $W/gpukv.test -test.run 'TestGPUCacheMatchesReference|TestGPUSoftcapPaged|TestGPUCacheBatchInvariant|TestGPURoPEAppendSameBits' -test.v -test.timeout 260s > $OUT/g1.log 2>&1; echo "g1 rc $? at $SECONDS s" ) &
PIDS="$PIDS $!"
( timeout 250 $W/gpukv.test -test.run 'TestGPUSyntheticFamilies|TestGPUTransformers' -test.v -test.timeout 260s > $OUT/g2.log 2>&1; echo "g2 rc $? at $SECONDS s" ) &
PIDS="$PIDS $!"
wait $PIDS
grep -h -- "^--- \|^ok\|^FAIL\|^PASS\|panic" $OUT/k1.log $OUT/k2.log $OUT/g1.log $OUT/g2.log | grep -v "^    " | head -60
echo "MT=2 cases: $(grep -c 'MT=2' $OUT/k1.log $OUT/k2.log | tr '\n' ' ')"
echo "== ptxas (bench)"; grep -A4 "prefill.cu \[" $OUT/bench-ptxas.log | grep -E "prefill.cu|Used|spill" | sed 's/ptxas info    ://g; s/ptxas         ://g' | paste - - - | cut -c1-300 | sort -u | head -30
echo "end at $SECONDS s"
