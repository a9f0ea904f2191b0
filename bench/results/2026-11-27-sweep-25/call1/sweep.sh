#!/bin/bash
# session 25 lead: the B = 1 step's same-bits launch knobs re-swept on the final tree (issue #19 item 2):
# main's defaults (base) alternated with one knob changed at a time; 8B shapes, 32K, fp16/int4/int2 KV.
D=$(cd "$(dirname "$0")" && pwd)
R=/tmp/r; rm -rf $R; mkdir -p $R; cp $0 $R/
T0=$(date +%s); END=$((T0 + 400))
snap() { tar czf $OUT/results.tmp -C /tmp r && mv $OUT/results.tmp $OUT/results.tgz; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1; cat $R/gpu.txt
export BITDECODE_CACHE_DIR=/tmp/bdc; mkdir -p /tmp/bdc
i=0
one() { # NAME [VAR=VALUE...]
  local n=$1; shift; i=$((i+1))
  local left=$((END - $(date +%s))); [ $left -lt 25 ] && { echo "skip $n (guard)" >> $R/summary.txt; return; }
  env "$@" timeout $((left < 90 ? left : 90)) $D/bitdecode bench model --ctx 32k --kv fp16,int4,int2 --batch 1 --steps 32 > $R/$(printf %02d $i)_$n.log 2>&1
  echo "$(printf %02d $i) $n $* : $(grep -E '^\| fp16 \| - \|' $R/$(printf %02d $i)_$n.log | awk -F'|' '{printf "%s=%s ", $4, $8}')" >> $R/summary.txt
  snap
}
one base
one pdlearly BITDECODE_PDL_EARLY=1
one base
one gemvearly_all BITDECODE_GEMV_EARLY=plain,rope,swiglu
one base
one gemvearly_none BITDECODE_GEMV_EARLY=none
one base
one depth8 BITDECODE_GEMV_DEPTH=8
one base
one decpdl_wait BITDECODE_DECODE_PDL=wait
one base
one wgmma3 BITDECODE_WGMMA_STAGES=3
one base
one nonormearly BITDECODE_NO_NORM_EARLY=1
one base
cat $R/summary.txt; snap
