#!/bin/bash
# session 24 lead: the merged tree's GPU tests (the session's merges: decode_mma's lean per-sequence
# kernel, DEC's SwiGLU list and o's form rule, v6.1c, gpu/cuda's per-OS loader), then the step at max
# batch (issue #19 item 3), at B = 1 (item 2) and DEC's half3 against off (#22).
# Usage (device): bash .gpu/call1.sh (bins.tar.xz beside it). Results: $OUT/results.tgz.
D=$(cd "$(dirname "$0")" && pwd)
R=/tmp/r; rm -rf $R; mkdir -p $R; cp $0 $R/
T0=$(date +%s); END=$((T0 + 575))
tl() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/timeline.txt; }
lim() { local left=$((END - $(date +%s))); [ $left -gt $1 ] && echo $1 || echo $((left > 1 ? left : 1)); }
snap() { tar czf $OUT/results.tmp -C /tmp r && mv $OUT/results.tmp $OUT/results.tgz; }
B=/tmp/bin; mkdir -p $B; tar xJf $D/bins.tar.xz -C $B; chmod +x $B/*; tl unpacked
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
export BITDECODE_CACHE_DIR=/tmp/bdc; mkdir -p /tmp/bdc
ROOT=$(pwd)
t() { local n=$1 l=$2 dir=$3; shift 3; (cd $ROOT/$dir && timeout $(lim $l) "$@" > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log); tl "$n done"; }
t kern 200 gpu/kernels $B/kernels.test -test.v -test.timeout 195s -test.run '^(TestGPUDecodeSeqSplits|TestGPUDecodeLookAheadMatchesRefold|TestGPUDecodeOneSplitMatchesCombine|TestOpsGLUSel|TestGEMVQ52MatchesV51|TestGEMVQ6DECMatchesV61|TestGEMVQ6DECPart|TestDECSelectMatchesWQ)$' &
t back 200 backend/gpu $B/gpu.test -test.v -test.timeout 195s -test.run '^(TestQ6DECDownSelect|TestQ6DECNormSelect|TestQ6DECOutSelect|TestQuantLinearQ6DEC|TestDECRun|TestJoinTiled)$' &
t kv 200 kvcache/gpukv $B/gpukv.test -test.v -test.timeout 195s -test.run '^(TestGPUModelDECLists|TestGPUBatchInvariantLogits|TestGPUCacheBatchInvariant|TestGPUGraphReplaySameBits|TestGPUTransformers)$' &
t cuda 120 gpu/cuda $B/cuda.test -test.v -test.timeout 115s &
wait; tl tests; snap
export BITDECODE_DEC_RESIDUAL=device
C=down_proj:16+v_proj:256+o_proj:32+gate_proj:32+up_proj:32
t max 150 . $B/bitdecode bench model --ctx 32k --kv fp16,int4,int2 --batch max --steps 16; snap
t b1 120 . $B/bitdecode bench model --ctx 1k,32k,128k --kv fp16,int4,int2 --batch 1 --steps 32; snap
t dec 60 . $B/bitdecode bench model --ctx 1k --kv int4 --no-linears --steps 16 --weights int4 --dec-k 0,$C,0,$C; snap
for f in $R/*.log; do echo "== $(basename $f): $(grep -c -- '--- FAIL' $f) FAIL, $(grep -c -- '--- PASS' $f) PASS, $(tail -1 $f)"; done
tl end; snap
