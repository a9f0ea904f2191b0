#!/bin/bash
# session 25 lead: issue #19 item 4, the grid and the step table on the H200 (main 7b6eed8 = session 24's
# final tree, whose H100 figures are bench/results/2026-11-27-s24-final). Results: $OUT/results.tgz.
D=$(cd "$(dirname "$0")" && pwd)
R=/tmp/r; rm -rf $R; mkdir -p $R; cp $0 $R/
T0=$(date +%s); END=$((T0 + 440))
tl() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/timeline.txt; }
lim() { local left=$((END - $(date +%s))); [ $left -gt $1 ] && echo $1 || echo $((left > 1 ? left : 1)); }
snap() { tar czf $OUT/results.tmp -C /tmp r && mv $OUT/results.tmp $OUT/results.tgz; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1; cat $R/gpu.txt
export BITDECODE_CACHE_DIR=/tmp/bdc; mkdir -p /tmp/bdc
t() { local n=$1 l=$2; shift 2; timeout $(lim $l) "$@" > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log; tl "$n done"; snap; }
t b1 80 $D/bitdecode bench model --ctx 1k,32k,128k --kv fp16,int4,int2 --batch 1 --steps 32
t max 110 $D/bitdecode bench model --ctx 32k --kv fp16,int4,int2 --batch max --steps 16
t attn 170 $D/bitdecode bench attn --device cuda --kv fp16,int4,int2,k4v2 --grid 1x8192,1x32768,1x131072,16x32768,32x8192,8x32768,55x32768,128x8192
t w 50 $D/bitdecode bench model --ctx 1k,32k --kv int4 --weights int4,int3,int8 --batch 1 --steps 32 --no-linears
tl end; snap
