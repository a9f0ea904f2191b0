#!/bin/bash
# session 26 lead (decode-step.md v39): the decode merges write the float32 output of a format that needs
# no rotation back (DecodeBuffers.Out32), so the cache's f16_to_f32 launch goes. Tests, then the B = 1 fp16
# step alternated with BITDECODE_DECODE_OUT32=0 (the conversion launch as before), then max batch.
D=$(cd "$(dirname "$0")" && pwd); B=/tmp/bin; mkdir -p $B; tar xJf $D/bins.tar.xz -C $B; chmod +x $B/*
R=/tmp/r; rm -rf $R; mkdir -p $R; cp $0 $R/
T0=$(date +%s); END=$((T0 + 570))
tl() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/timeline.txt; }
lim() { local left=$((END - $(date +%s))); [ $left -gt $1 ] && echo $1 || echo $((left > 1 ? left : 1)); }
snap() { tar czf $OUT/results.tmp -C /tmp r && mv $OUT/results.tmp $OUT/results.tgz; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1; cat $R/gpu.txt
export BITDECODE_CACHE_DIR=/tmp/bdc; mkdir -p /tmp/bdc
ROOT=$(pwd)
t() { local n=$1 l=$2 dir=$3; shift 3; (cd $ROOT/$dir && timeout $(lim $l) "$@" > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log); tl "$n done"; }
t kern 230 gpu/kernels $B/kernels.test -test.v -test.timeout 225s -test.run '^(TestGPUDecodeMatchesReference|TestGPUDecodeOneSplitMatchesCombine|TestGPUDecodeSeqSplits|TestWGMMAFewSmem|TestGridDependentKernelsWait|TestParseTuning)$' &
t kv 230 kvcache/gpukv $B/gpukv.test -test.v -test.timeout 225s -test.run '^(TestGPUCacheMatchesReference|TestGPUGraphReplaySameBits|TestGPUTransformers|TestGPUBatchInvariantLogits|TestGPUCacheBatchInvariant|TestGPUPerLayerFormats|TestGPURoPEAppendSameBits|TestGPUSyntheticFamilies|TestGPUGreedyTokens)$' &
wait; tl tests; snap
for f in $R/kern.log $R/kv.log; do echo "== $(basename $f): $(grep -c -- '--- FAIL' $f) FAIL, $(grep -c -- '--- PASS' $f) PASS, $(tail -1 $f)"; done | tee -a $R/timeline.txt
i=0
b1() { # NAME [VAR=VALUE...]
  local n=$1; shift; i=$((i+1))
  local left=$((END - $(date +%s))); [ $left -lt 30 ] && { tl "skip $n (guard)"; return; }
  env "$@" timeout $(lim 60) $B/bitdecode bench model --ctx 1k,32k,128k --kv fp16 --batch 1 --steps 32 --no-linears > $R/b1_$(printf %02d $i)_$n.log 2>&1
  tl "b1 $n $*: $(grep -E 'ctx .* B 1 TP' $R/b1_$(printf %02d $i)_$n.log | awk '{printf "%s=%s ", $4, $9}')"
  snap
}
b1 new; b1 old BITDECODE_DECODE_OUT32=0; b1 new; b1 old BITDECODE_DECODE_OUT32=0; b1 new; b1 old BITDECODE_DECODE_OUT32=0
for m in new old; do
  left=$((END - $(date +%s))); [ $left -lt 40 ] && break
  if [ $m = old ]; then export BITDECODE_DECODE_OUT32=0; fi
  timeout $(lim 60) $B/bitdecode bench model --ctx 32k --kv fp16 --batch max --steps 16 --no-linears > $R/max_$m.log 2>&1
  tl "max $m: $(grep -E 'ctx .* B ' $R/max_$m.log | head -2 | tr '\n' ' ')"
  unset BITDECODE_DECODE_OUT32; snap
done
tl end; snap
