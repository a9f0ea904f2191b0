#!/bin/bash
# session 25 lead, second sweep call: the three knobs the first call's guard skipped, and base against
# GEMV_EARLY=plain,rope,swiglu (the first call's only candidate, -0.04 ms at int4/int2 32K: noise?)
# alternated four times at 32K and 128K. `--no-linears` (the first call ran the linear table in every
# process, hence its guard).
D=$(cd "$(dirname "$0")" && pwd)
R=/tmp/r; rm -rf $R; mkdir -p $R; cp $0 $R/
T0=$(date +%s); END=$((T0 + 380))
snap() { tar czf $OUT/results.tmp -C /tmp r && mv $OUT/results.tmp $OUT/results.tgz; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1; cat $R/gpu.txt
export BITDECODE_CACHE_DIR=/tmp/bdc; mkdir -p /tmp/bdc
i=0
one() { # NAME CTX [VAR=VALUE...]
  local n=$1 ctx=$2; shift 2; i=$((i+1))
  local left=$((END - $(date +%s))); [ $left -lt 20 ] && { echo "skip $n $ctx (guard)" >> $R/summary.txt; return; }
  local f=$R/$(printf %02d $i)_${n}_$ctx.log
  env "$@" timeout $((left < 90 ? left : 90)) $D/bitdecode bench model --ctx $ctx --kv fp16,int4,int2 --batch 1 --steps 32 --no-linears > $f 2>&1
  echo "$(printf %02d $i) $n $ctx $* : $(grep -E '^\| fp16 \| - \|' $f | awk -F'|' '{printf "%s=%s ", $4, $8}')" >> $R/summary.txt
  snap
}
A=BITDECODE_GEMV_EARLY=plain,rope,swiglu
one warm 1k
one decpdl_wait 32k BITDECODE_DECODE_PDL=wait
one wgmma3 32k BITDECODE_WGMMA_STAGES=3
one nonormearly 32k BITDECODE_NO_NORM_EARLY=1
for r in 1 2 3 4; do one base 32k; one early_all 32k $A; done
for r in 1 2; do one base 128k; one early_all 128k $A; done
cat $R/summary.txt; snap
