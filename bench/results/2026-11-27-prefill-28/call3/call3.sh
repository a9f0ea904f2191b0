#!/bin/bash
# s28-prefill call 3: prefill.cu v3's correctness (kernel and cache tests) and
# bitdecode run's prefill, main (483f225f) beside the branch, on one H100.
exec > >(tee -a $OUT/call.log) 2>&1
date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
R=$PWD; P=$R/.gpu-pf; W=/tmp/w; mkdir -p $W
for f in bd-main bd-pf kernels.test gpukv.test; do xz -dc $P/$f.xz > $W/$f; chmod +x $W/$f; done
export BITDECODE_CACHE_DIR=/tmp/bdc
( python3 $P/gen_st.py /tmp/m8b $P/tokdir > $OUT/gen.log 2>&1; echo "gen rc $? at $SECONDS s" ) &
PIDS="$!"
KT='TestGPUPrefillMatchesReference/'
( cd $R/gpu/kernels && BITDECODE_PTXAS_VERBOSE=1 timeout 200 $W/kernels.test -test.run "TestPrefillRoute|${KT}(fp16|bf16|int8|int4)\$" -test.v -test.timeout 210s > $OUT/k1.log 2>&1; echo "k1 rc $? at $SECONDS s" ) &
PIDS="$PIDS $!"
( cd $R/gpu/kernels && timeout 200 $W/kernels.test -test.run "${KT}(int4:kt128|int4:kt32:v32|int2|int2:kc32:v32)\$" -test.v -test.timeout 210s > $OUT/k2.log 2>&1; echo "k2 rc $? at $SECONDS s" ) &
PIDS="$PIDS $!"
( cd $R/gpu/kernels && timeout 200 $W/kernels.test -test.run "${KT}(k8v4|k4v2|int4:kc64:res64)\$" -test.v -test.timeout 210s > $OUT/k3.log 2>&1; echo "k3 rc $? at $SECONDS s" ) &
PIDS="$PIDS $!"
( cd $R/kvcache/gpukv && timeout 200 $W/gpukv.test -test.run 'TestGPUCacheMatchesReference|TestGPUSoftcapPaged|TestGPUCacheBatchInvariant' -test.v -test.timeout 210s > $OUT/g1.log 2>&1; echo "g1 rc $? at $SECONDS s" ) &
PIDS="$PIDS $!"
wait $PIDS
grep -h -- "^--- \|^ok\|^FAIL\|^PASS\|panic" $OUT/k1.log $OUT/k2.log $OUT/k3.log $OUT/g1.log | grep -v "^    " | head -60
grep -h "prefill.cu \[\|Used\|spill" $OUT/k1.log | grep -A2 "prefill.cu \[" | grep -v "^--" | paste - - - | sort -u | cut -c1-220
echo "tests done at $SECONDS s"
if grep -q "error" $OUT/k1.log && ! grep -q "^--- PASS: TestGPUPrefillMatchesReference" $OUT/k1.log; then grep -m5 "error" $OUT/k1.log; echo "no bench: the kernel failed"; exit 0; fi
run() { # binary kv prompt [env]
  local b=$1 kv=$2 p=$3; shift 3
  echo "== $b $kv p$p $*"
  env "$@" timeout 100 $W/bd-$b run --model /tmp/m8b --device cuda --kv $kv --max-tokens 1 --temperature 0 --prompt-file $P/p$p.txt 2>$W/err >$W/outtok; grep "prompt tokens\|rror" $W/err; echo "token: $(head -c 40 $W/outtok | tr '\n' ' ')"
}
{ for b in main pf; do run $b int4 512; done
  for p in 4096 32000; do for b in main pf; do [ $SECONDS -lt 400 ] && run $b int4 $p; done; done
  [ $SECONDS -lt 420 ] && run pf fp16 512
  [ $SECONDS -lt 430 ] && run pf fp16 32000
  [ $SECONDS -lt 440 ] && run pf int4 32000
} 2>&1 | tee $OUT/bench.txt
echo "end at $SECONDS s"
