#!/bin/bash
# s29-prefill call 5: v4's gain broken down on the final code, one H100, one
# call: one chunk at 32K keys with MT and KS each toggled
# (BITDECODE_PREFILL_MT / _KS), and main beside it.
exec > >(tee -a $OUT/call.log) 2>&1
date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
R=$PWD; P=$R/.gpu-pf29; W=/tmp/w; mkdir -p $W
for f in kernels.test kernels-main.test; do xz -dc $P/$f.xz > $W/$f; chmod +x $W/$f; done
export BITDECODE_CACHE_DIR=/tmp/bdc
cd $R/gpu/kernels
B='-test.run ^$ -test.bench PrefillAttention -test.benchtime 1x'
export BITDECODE_BENCH_PREFILL_CASES=fp16/128/512/32768,bf16/128/512/32768,int8/128/512/32768,int4/128/512/32768,fp16/64/512/32768,fp16/256/512/32768,fp16/128/128/32768,fp16/128/256/32768
for v in "0 0" "2 1" "1 1" "1 2" "2 2" "0 0"; do
  set -- $v; echo "== MT $1 KS $2 (0: the planner's)"
  E=""; [ $1 != 0 ] && E="BITDECODE_PREFILL_MT=$1"; [ $2 != 0 ] && E="$E BITDECODE_PREFILL_KS=$2"
  env $E timeout 60 $W/kernels.test $B 2>&1 | grep -E "^[a-z0-9:]+ +[0-9]+ +[0-9]+ +[0-9]+ " | tee -a $OUT/bench-mtks.txt
done
echo "== main"; timeout 60 $W/kernels-main.test $B 2>&1 | grep -E "^fp16 +128 +32768|^int4 +128 +32768|^int8 +128 +32768|^bf16 +128 +32768|^fp16 +(64|256) +32768" | tee $OUT/bench-main.txt
echo "end at $SECONDS s"
