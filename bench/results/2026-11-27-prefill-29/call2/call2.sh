#!/bin/bash
# s29-prefill call 2: prefill.cu v4 with two warp groups a CTA splitting the
# key tiles (KS = 2; MT = 2 up to D = 128): one chunk's attention (v4's
# default; MT = 1 KS = 1, v3's structure with v4's stages; MT = 1 KS = 2),
# then every GPU test on v4's default.
exec > >(tee -a $OUT/call.log) 2>&1
date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
R=$PWD; P=$R/.gpu-pf29; W=/tmp/w; mkdir -p $W
for f in kernels.test gpukv.test; do xz -dc $P/$f.xz > $W/$f; chmod +x $W/$f; done
export BITDECODE_CACHE_DIR=/tmp/bdc
cd $R/gpu/kernels
B='-test.run ^$ -test.bench PrefillAttention -test.benchtime 1x'
F='grep -v ^goos\|^goarch\|^pkg\|^cpu\|^gpu/kernels:'
BITDECODE_PTXAS_VERBOSE=1 timeout 150 $W/kernels.test $B 2>$OUT/bench-ptxas.log | $F | tee $OUT/bench-v4.txt
echo "bench v4 at $SECONDS s"
BITDECODE_PREFILL_MT=1 BITDECODE_PREFILL_KS=1 timeout 120 $W/kernels.test $B 2>&1 | $F | tee $OUT/bench-mt1ks1.txt
echo "bench mt1 ks1 at $SECONDS s"
KT='TestGPUPrefillMatchesReference/'
( BITDECODE_PTXAS_VERBOSE=1 timeout 230 $W/kernels.test -test.run "TestPrefillRoute|${KT}(fp16|bf16|int8|int4)\$" -test.v -test.timeout 240s > $OUT/k1.log 2>&1; echo "k1 rc $? at $SECONDS s" ) &
PIDS="$!"
( timeout 230 $W/kernels.test -test.run "${KT}(int4:kt128|int4:kt32:v32|int2|int2:kc32:v32|k8v4|k4v2|int4:kc64:res64)\$" -test.v -test.timeout 240s > $OUT/k2.log 2>&1; echo "k2 rc $? at $SECONDS s" ) &
PIDS="$PIDS $!"
cd $R/kvcache/gpukv
( timeout 230 $W/gpukv.test -test.run 'TestGPUCacheMatchesReference|TestGPUSoftcapPaged|TestGPUCacheBatchInvariant|TestGPURoPEAppendSameBits' -test.v -test.timeout 240s > $OUT/g1.log 2>&1; echo "g1 rc $? at $SECONDS s" ) &
PIDS="$PIDS $!"
( timeout 230 $W/gpukv.test -test.run 'TestGPUSyntheticFamilies|TestGPUTransformers' -test.v -test.timeout 240s > $OUT/g2.log 2>&1; echo "g2 rc $? at $SECONDS s" ) &
PIDS="$PIDS $!"
wait $PIDS
grep -h -- "^--- \|^ok\|^FAIL\|^PASS\|panic" $OUT/k1.log $OUT/k2.log $OUT/g1.log $OUT/g2.log | grep -v "^    " | head -60
cd $R/gpu/kernels
[ $SECONDS -lt 400 ] && BITDECODE_PREFILL_MT=1 BITDECODE_BENCH_PREFILL_CASES=fp16/128/512/32768,int4/128/512/32768,fp16/128/256/32768,int4/128/256/32768,fp16/128/128/32768 timeout 50 $W/kernels.test $B 2>&1 | $F | tee $OUT/bench-mt1ks2.txt
echo "== ptxas (bench)"; grep -A4 "prefill.cu \[" $OUT/bench-ptxas.log | grep -E "prefill.cu|Used|spill" | sed 's/ptxas info    ://g; s/ptxas         ://g' | paste - - - | cut -c1-240 | sort -u
echo "end at $SECONDS s"
