#!/bin/bash
# Session 29 call 2: the int8 LM head at serving batch sizes (gemmq's rows) beside the 16-bit head.
exec > >(tee -a $OUT/call.log) 2>&1
date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
R=$PWD; P=$R/.gpu-s29; W=/tmp/w; mkdir -p $W
xz -dc $P/bitdecode.xz > $W/bitdecode; chmod +x $W/bitdecode
export BITDECODE_CACHE_DIR=/tmp/bdc
for b in 16 64; do
  echo "== batch $b at $SECONDS s"
  timeout 170 $W/bitdecode bench model --preset llama-3.1-8b --ctx 4k --kv int4 --weights int4,int4:head=fp16,int8,int8:head=fp16 --batch $b --no-linears > $OUT/b8-$b.log 2>&1; echo "rc $?"
  grep "^|" $OUT/b8-$b.log
done
echo "== 1B batch 64 at $SECONDS s"
timeout 100 $W/bitdecode bench model --preset llama-3.2-1b --ctx 4k --kv int4 --weights int4,int4:head=fp16 --batch 64 --no-linears > $OUT/b1-64.log 2>&1; echo "rc $?"
grep "^|" $OUT/b1-64.log
echo "end at $SECONDS s"
