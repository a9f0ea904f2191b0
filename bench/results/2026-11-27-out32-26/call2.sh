#!/bin/bash
# session 26 lead (decode-step.md v39), call 2 on the warm machine: the decode tests' v1 and wgmma halves with
# Out32, then fp16 and int8 KV at max batch and int8 at B = 1, alternated with BITDECODE_DECODE_OUT32=0.
D=$(cd "$(dirname "$0")" && pwd); B=/tmp/bin; mkdir -p $B; [ -x $B/bitdecode ] || tar xJf $D/bins.tar.xz -C $B; chmod +x $B/*
R=/tmp/r2; rm -rf $R; mkdir -p $R; cp $0 $R/
T0=$(date +%s); END=$((T0 + 420))
tl() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/timeline.txt; }
lim() { local left=$((END - $(date +%s))); [ $left -gt $1 ] && echo $1 || echo $((left > 1 ? left : 1)); }
snap() { tar czf $OUT/results.tmp -C /tmp r2 && mv $OUT/results.tmp $OUT/results.tgz; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
export BITDECODE_CACHE_DIR=/tmp/bdc; mkdir -p /tmp/bdc
ROOT=$(pwd)
(cd $ROOT/gpu/kernels && timeout 300 $B/kernels.test -test.v -test.timeout 295s -test.run '^TestGPUDecodeMatchesReference$/^(v1|wgmma)$' > $R/kern.log 2>&1; echo "rc=$?" >> $R/kern.log; tl "kern done") 
grep -E "^(--- |ok|FAIL|rc=)|^    --- " $R/kern.log | tee -a $R/timeline.txt; snap
run() { # NAME ARGS... (env in E)
  local n=$1; shift
  local left=$((END - $(date +%s))); [ $left -lt 20 ] && { tl "skip $n (guard)"; return; }
  env $E timeout $(lim 40) $B/bitdecode bench model "$@" --no-linears > $R/$n.log 2>&1
  tl "$n $E: $(grep -E 'ctx .* B .* TP' $R/$n.log | awk '{printf "%s %s B%s=%s (%s) ", $2, $4, $6, $9, $NF}')"; snap
}
for k in 1 2 3; do
  E=; run max_fp16_new_$k --ctx 32k --kv fp16 --batch max --steps 16
  E=BITDECODE_DECODE_OUT32=0; run max_fp16_old_$k --ctx 32k --kv fp16 --batch max --steps 16
done
for k in 1 2; do
  E=; run int8_new_$k --ctx 32k --kv int8 --batch max --steps 16
  E=BITDECODE_DECODE_OUT32=0; run int8_old_$k --ctx 32k --kv int8 --batch max --steps 16
  E=; run int8b1_new_$k --ctx 1k,32k,128k --kv int8 --batch 1 --steps 32
  E=BITDECODE_DECODE_OUT32=0; run int8b1_old_$k --ctx 1k,32k,128k --kv int8 --batch 1 --steps 32
done
tl end; snap
