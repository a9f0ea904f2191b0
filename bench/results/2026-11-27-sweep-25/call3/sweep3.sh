#!/bin/bash
# session 25 lead, third sweep call: GEMV_EARLY=plain,rope,swiglu (all) and plain,rope against main's
# default (rope) at 1K, 32K and 128K, alternated, to see whether call 2's -0.07 to -0.1 ms at int4/int2
# 128K holds. `--no-linears`, the CUBIN cache warm after the first process.
D=$(cd "$(dirname "$0")" && pwd)
R=/tmp/r; rm -rf $R; mkdir -p $R; cp $0 $R/
T0=$(date +%s); END=$((T0 + 330))
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
ALL=BITDECODE_GEMV_EARLY=plain,rope,swiglu
PR=BITDECODE_GEMV_EARLY=plain,rope
one warm 1k
for r in 1 2 3 4; do one base 128k; one all 128k $ALL; one pr 128k $PR; done
for r in 1 2 3; do one base 1k; one all 1k $ALL; one pr 1k $PR; done
for r in 1 2 3; do one base 32k; one all 32k $ALL; one pr 32k $PR; done
cat $R/summary.txt; snap
