#!/bin/bash
# s28-prefill call 5: prefill.cu's math step (BITDECODE_PREFILL_STEP 64, 32,
# 16): one chunk (BenchmarkPrefillAttention), correctness, whole prefill.
exec > >(tee -a $OUT/call.log) 2>&1
date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
R=$PWD; P=$R/.gpu-pf; W=/tmp/w; mkdir -p $W
for f in bd-pf kernels.test; do xz -dc $P/$f.xz > $W/$f; chmod +x $W/$f; done
export BITDECODE_CACHE_DIR=/tmp/bdc
( python3 $P/gen_st.py /tmp/m8b $P/tokdir > $OUT/gen.log 2>&1; echo "gen rc $? at $SECONDS s" ) &
GEN=$!
cd $R/gpu/kernels
for s in 64 32 16; do BITDECODE_PREFILL_STEP=$s timeout 120 $W/kernels.test -test.run '^$' -test.bench PrefillAttention -test.benchtime 1x 2>&1 | grep -v "^goos\|^goarch\|^pkg\|^cpu" | tee -a $OUT/bench-attn.txt; done
echo "bench done at $SECONDS s"
( BITDECODE_PREFILL_STEP=32 timeout 150 $W/kernels.test -test.run 'TestGPUPrefillMatchesReference/(fp16|bf16|int4|k4v2|int4:kt32:v32)$' -test.v > $OUT/t32.log 2>&1; echo "t32 rc $? at $SECONDS s" ) &
T1=$!
( BITDECODE_PREFILL_STEP=16 timeout 150 $W/kernels.test -test.run 'TestGPUPrefillMatchesReference/(fp16|int8|int2|k8v4|int4:kc64:res64)$' -test.v > $OUT/t16.log 2>&1; echo "t16 rc $? at $SECONDS s" ) &
wait $T1 $! $GEN
grep -h -- "^--- \|^ok\|^FAIL\|^PASS\|panic" $OUT/t32.log $OUT/t16.log | grep -v "^    "
run() { # kv prompt step
  echo "== pf $1 p$2 step $3"
  BITDECODE_PREFILL_STEP=$3 timeout 100 $W/bd-pf run --model /tmp/m8b --device cuda --kv $1 --max-tokens 1 --temperature 0 --prompt-file $P/p$2.txt 2>&1 >/dev/null | grep "prompt tokens\|rror"
}
cd $R
{ run int4 512 64; run fp16 512 64
  for kv in fp16 int4; do for s in 64 32 16; do [ $SECONDS -lt 500 ] && run $kv 32000 $s; done; done
} 2>&1 | tee $OUT/bench.txt
echo "end at $SECONDS s"
