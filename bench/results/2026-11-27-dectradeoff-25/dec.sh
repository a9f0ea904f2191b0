#!/bin/bash
# session 25 lead: DEC's perplexity-latency trade-off on the current tree (issue #22's plot): the 8B-shape
# step at 1K, int4 KV, B = 1, residuals in device memory, one k_chunk on every layer and half3.
D=$(cd "$(dirname "$0")" && pwd)
R=/tmp/r; rm -rf $R; mkdir -p $R; cp $0 $R/
snap() { tar czf $OUT/results.tmp -C /tmp r && mv $OUT/results.tmp $OUT/results.tgz; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1; cat $R/gpu.txt
export BITDECODE_CACHE_DIR=/tmp/bdc; mkdir -p /tmp/bdc
export BITDECODE_DEC_RESIDUAL=device
T0=$(date +%s)
for run in 1 2; do
  timeout 150 $D/bitdecode bench model --ctx 1k --kv int4 --weights int4,int3 --dec-k 0,8,16,32,64,half3 --no-linears --steps 16 \
    --json $R/model_$run.json > $R/model_$run.log 2>&1; echo "rc=$? $(( $(date +%s) - T0 ))s" >> $R/model_$run.log; snap
done
tail -n 16 $R/model_1.log $R/model_2.log
