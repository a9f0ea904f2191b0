#!/bin/bash
# s28-prefill call 1: prefill.cu's correctness (kernel and cache tests) and
# bitdecode run's prefill, main (483f225f) beside the branch, on one H100.
exec > >(tee -a $OUT/call.log) 2>&1
date -u; nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv
R=$PWD; P=$R/.gpu-pf; W=/tmp/w; mkdir -p $W
for f in bd-main bd-pf kernels.test gpukv.test; do xz -dc $P/$f.xz > $W/$f; chmod +x $W/$f; done
export BITDECODE_CACHE_DIR=/tmp/bdc
( python3 $P/gen_st.py /tmp/m8b $P/tokdir > $OUT/gen.log 2>&1; echo "gen rc $? at $SECONDS s" ) &
PIDS="$!"
KT='TestGPUPrefillMatchesReference/'
( cd $R/gpu/kernels && BITDECODE_PTXAS_VERBOSE=1 timeout 250 $W/kernels.test -test.run "TestPrefillRoute|${KT}(fp16|bf16|int8|int4)\$" -test.v -test.timeout 260s > $OUT/k1.log 2>&1; echo "k1 rc $? at $SECONDS s" ) &
PIDS="$PIDS $!"
( cd $R/gpu/kernels && timeout 250 $W/kernels.test -test.run "${KT}(int4:kt128|int4:kt32:v32|int2|int2:kc32:v32)\$" -test.v -test.timeout 260s > $OUT/k2.log 2>&1; echo "k2 rc $? at $SECONDS s" ) &
PIDS="$PIDS $!"
( cd $R/gpu/kernels && timeout 250 $W/kernels.test -test.run "${KT}(k8v4|k4v2|int4:kc64:res64)\$" -test.v -test.timeout 260s > $OUT/k3.log 2>&1; echo "k3 rc $? at $SECONDS s" ) &
PIDS="$PIDS $!"
( cd $R/kvcache/gpukv && timeout 250 $W/gpukv.test -test.run 'TestGPUCacheMatchesReference|TestGPUSyntheticFamilies|TestGPUTransformers|TestGPUSoftcapPaged|TestGPUPrefixSharing|TestGPUCacheBatchInvariant' -test.v -test.timeout 260s > $OUT/gpukv.log 2>&1; echo "gpukv rc $? at $SECONDS s" ) &
PIDS="$PIDS $!"
wait $PIDS
grep -h -- "^--- \|^ok\|^FAIL\|^PASS\|panic" $OUT/k1.log $OUT/k2.log $OUT/k3.log $OUT/gpukv.log | head -80
grep -h -A3 "prefill.cu \[" $OUT/k1.log | grep -i "registers\|spill\|prefill.cu" | head -30
echo "tests done at $SECONDS s"
run() { # binary kv prompt [env]
  local b=$1 kv=$2 p=$3; shift 3
  echo "== $b $kv p$p $*"
  env "$@" timeout 100 $W/bd-$b run --model /tmp/m8b --device cuda --kv $kv --max-tokens 1 --temperature 0 --prompt-file $P/p$p.txt 2>$W/err >$W/outtok; grep -v "^loading\|^\s*$" $W/err | grep "prompt tokens\|rror"; echo "token: $(cat $W/outtok | head -c 200)"
}
for kv in fp16 int4; do
  for b in main pf; do [ $SECONDS -lt 480 ] && run $b $kv 512; done
  for p in 4096 32000; do for b in main pf; do [ $SECONDS -lt 540 ] && run $b $kv $p; done; done
done 2>&1 | tee $OUT/bench.txt
[ $SECONDS -lt 560 ] && run pf fp16 32000 BITDECODE_PREFILL_FA=0 | tee -a $OUT/bench.txt
echo "end at $SECONDS s"
