#!/bin/bash
# Session 29 call 1: the quantized LM head on the GPU (tests, bench model, eval ppl, run).
exec > >(tee -a $OUT/call.log) 2>&1
date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
R=$PWD; P=$R/.gpu-s29; W=/tmp/w; mkdir -p $W
for f in bitdecode gpu.test; do xz -dc $P/$f.xz > $W/$f; chmod +x $W/$f; done
export BITDECODE_CACHE_DIR=/tmp/bdc
cd $R/backend/gpu && timeout 280 $W/gpu.test -test.run 'TestModelQuantHeadSynth|TestQuantLinear$' -test.v -test.timeout 280s > $OUT/t1.log 2>&1; echo "t1 rc $? at $SECONDS s"
grep -h -- "^--- \|^    --- \|^ok\|^FAIL\|^PASS\|panic\|worst" $OUT/t1.log | head -40
cd $R
echo "== bench 8B at $SECONDS s"
timeout 200 $W/bitdecode bench model --preset llama-3.1-8b --ctx 1k,32k --kv int4 --weights int4,int4:head=fp16,int8,int8:head=fp16 --no-linears > $OUT/b8.log 2>&1; echo "b8 rc $?"
grep -v "^$" $OUT/b8.log | tail -16
echo "== bench 1B at $SECONDS s"
timeout 100 $W/bitdecode bench model --preset llama-3.2-1b --ctx 1k --kv int4 --weights int4,int4:head=fp16,int8,int8:head=fp16 --no-linears > $OUT/b1.log 2>&1; echo "b1 rc $?"
grep -v "^$" $OUT/b1.log | tail -10
echo "end at $SECONDS s"
