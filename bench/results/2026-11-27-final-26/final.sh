#!/bin/bash
# session 26 lead: the final tree's GPU tests for the session's kernel changes (Out32 in every decode merge,
# the header's fenceProxyAsync, skinny.cu v3): the decode suite whole (mma, v1, wgmma), the gpukv suite,
# backend/gpu's linear, skinny and graph tests, then one B = 1 and one max-batch step table.
D=$(cd "$(dirname "$0")" && pwd); B=/tmp/bin; mkdir -p $B; tar xJf $D/bins.tar.xz -C $B; chmod +x $B/*
R=/tmp/rf; rm -rf $R; mkdir -p $R; cp $0 $R/
T0=$(date +%s); END=$((T0 + 570))
tl() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/timeline.txt; }
lim() { local left=$((END - $(date +%s))); [ $left -gt $1 ] && echo $1 || echo $((left > 1 ? left : 1)); }
snap() { tar czf $OUT/results.tmp -C /tmp rf && mv $OUT/results.tmp $OUT/results.tgz; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1; cat $R/gpu.txt
export BITDECODE_CACHE_DIR=/tmp/bdc; mkdir -p /tmp/bdc
ROOT=$(pwd)
t() { local n=$1 l=$2 dir=$3; shift 3; (cd $ROOT/$dir && timeout $(lim $l) "$@" > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log); tl "$n done"; }
t mma 400 gpu/kernels $B/kernels.test -test.v -test.timeout 395s -test.run '^TestGPUDecodeMatchesReference$/^mma$' &
t kern 300 gpu/kernels $B/kernels.test -test.v -test.timeout 295s -test.run '^(TestGPUDecodeOneSplitMatchesCombine|TestGPUDecodeSeqSplits|TestGPUDecodeLookAheadMatchesRefold|TestGPUDecodeWindowMatchesReference|TestSkinnyMatchesReference|TestSkinnySplitAndRefusals|TestGridDependentKernelsWait|TestWGMMAFewSmem)$' &
t kv 300 kvcache/gpukv $B/gpukv.test -test.v -test.timeout 295s &
t back 300 backend/gpu $B/gpu.test -test.v -test.timeout 295s -test.run '^(TestLinear|TestJoin|TestFold|TestEnqueue|TestModelPDLSameBits|TestGroupGraphReplay|TestBatchInvariantLinear|TestParseOptions)' &
wait; tl tests; snap
for f in $R/mma.log $R/kern.log $R/kv.log $R/back.log; do echo "== $(basename $f): $(grep -c -- '--- FAIL' $f) FAIL, $(grep -c -- '--- PASS' $f) PASS, $(grep -c -- '--- SKIP' $f) SKIP, $(tail -1 $f)"; done | tee -a $R/timeline.txt
left=$((END - $(date +%s)))
if [ $left -gt 60 ]; then
  timeout $(lim 60) $B/bitdecode bench model --ctx 1k,32k,128k --kv fp16,int4,int2 --batch 1 --steps 32 --no-linears > $R/b1.log 2>&1
  tl "b1: $(grep -E 'ctx .* B 1 TP' $R/b1.log | awk '{printf "%s %s=%s %s ", $2, $4, $9, $NF}')"; snap
fi
left=$((END - $(date +%s)))
if [ $left -gt 40 ]; then
  timeout $(lim 60) $B/bitdecode bench model --ctx 32k --kv fp16,int4,int2 --batch max --steps 16 --no-linears > $R/max.log 2>&1
  tl "max: $(grep -E 'ctx .* B .* TP' $R/max.log | awk '{printf "%s B%s=%s %s ", $2, $6, $9, $NF}')"; snap
fi
tl end; snap
