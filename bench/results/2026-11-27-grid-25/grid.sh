#!/bin/bash
# session 25 lead: the README's H100 attention grid on the final tree (session 24's code), one run.
D=$(cd "$(dirname "$0")" && pwd)
R=/tmp/r; rm -rf $R; mkdir -p $R; cp $0 $R/
snap() { tar czf $OUT/results.tmp -C /tmp r && mv $OUT/results.tmp $OUT/results.tgz; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1; cat $R/gpu.txt
export BITDECODE_CACHE_DIR=/tmp/bdc; mkdir -p /tmp/bdc
T0=$(date +%s)
timeout 330 $D/bitdecode bench attn --device cuda --kv fp16,int8,int4,int4:kt128,int2,k4v2 \
  --grid 1x8192,1x32768,1x131072,16x32768,32x8192,8x32768,55x32768,128x8192,100x32768 --json $R/attn.json > $R/attn.log 2>&1
echo "rc=$? $(( $(date +%s) - T0 ))s" >> $R/attn.log; snap; tail -n 60 $R/attn.log | grep -E "^\| auto|rc=|ceiling"
