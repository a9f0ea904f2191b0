#!/bin/bash
# Session 20 call 1: the max-batch plans' split sweep (BITDECODE_DECODE_SPLITS=target:N), the
# timeline at 55 x 32K int4 and 100 x 32K int2, bench model at max batch with two split targets.
set -o pipefail
B=.gpu-mbattn/bitdecode
G=55x32768,100x32768,128x8192
t0=$(date +%s)
el() { echo $(( $(date +%s)-t0 )); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt 2>&1
run() { # name timeout env... -- args
  local n=$1 to=$2; shift 2
  local left=$(( 172 - $(el) )); [ $left -lt 12 ] && { echo "$n skipped at $(el)s" >> $OUT/times.txt; return; }
  [ $to -gt $left ] && to=$left
  ( timeout $to env "${@}" ) > $OUT/$n.md 2>&1; echo "$n rc=$? end $(el)s" >> $OUT/times.txt
}
run attn_def 45 $B bench attn --device cuda --kv int4,int2 --grid $G
run tl 40 BITDECODE_DECODE_TIMELINE=1 $B bench attn --device cuda --kernel mma --kv int4,int2 --grid 55x32768,100x32768
run attn_t1320 40 BITDECODE_DECODE_SPLITS=target:1320 $B bench attn --device cuda --kv int4,int2 --grid $G
run attn_t2640 40 BITDECODE_DECODE_SPLITS=target:2640 $B bench attn --device cuda --kv int4,int2 --grid $G
run model_t1320 30 BITDECODE_DECODE_SPLITS=target:1320 $B bench model --ctx 32k --kv int4,int2 --batch max --steps 16 --no-linears
run model_def 30 $B bench model --ctx 32k --kv int4,int2 --batch max --steps 16 --no-linears
run attn_t1760 35 BITDECODE_DECODE_SPLITS=target:1760 $B bench attn --device cuda --kv int4,int2 --grid $G
run attn_t3520 35 BITDECODE_DECODE_SPLITS=target:3520 $B bench attn --device cuda --kv int4,int2 --grid $G
cd $OUT && tar czf results.tgz *.md times.txt gpu.txt && rm -f *.md
