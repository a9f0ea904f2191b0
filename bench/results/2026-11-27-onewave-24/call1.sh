#!/bin/bash
# Session 31 (onewave-24) call 1. bitdecode-new = s24-onewave 4b27aab (v2.34),
# bitdecode-main = main d57e2de. bench attn --batch-invariant exists only in
# the new build: its BITDECODE_DECODE_SEQLEAN=0 compiles main's per-sequence
# kernel (the same source after the preprocessor, no new option), so the
# attention A/B is new(SEQLEAN=0) vs new(default), alternated; main's own
# binary runs the batch-invariant model step. Phase 1: the GPU tests in
# parallel processes beside the warm-ups (CUDA 13's ptxas reports); phase 2:
# the A/B, one process at a time, each step skipped past its time guard.
set -o pipefail
D=$PWD/.gpu-onewave
W=/tmp/w; R=$W/r; mkdir -p $R
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
tar xJf $D/bins.tar.xz -C $W && chmod +x $W/bitdecode-* $W/*.test
M=$W/bitdecode-main; N=$W/bitdecode-new
pack() { (cd $W && tar czf $OUT/results.tgz r); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
T="-test.v -test.count=1"
tst() { local n=$1 dir=$2 bin=$3 lim=$4 pat=$5; shift 5; ( cd $dir && env "$@" timeout $((lim+5)) $W/$bin $T -test.timeout ${lim}s -test.run "$pat" > $R/t_$n.log 2>&1; echo "t_$n rc=$? $(el)s" >> $R/times.txt ) & }
tst seq gpu/kernels kernels.test 165 'TestGPUDecodeSeqSplits|TestGPUDecodeLookAheadMatchesRefold|TestGPUDecodeOneSplitMatchesCombine' X=1
tst lean gpu/kernels kernels.test 165 'TestGPUDecodeSeqSplits' BITDECODE_DECODE_SEQLEAN=1
tst long gpu/kernels kernels.test 165 'TestGPUDecodeLong' X=1
tst kv kvcache/gpukv gpukv.test 165 'TestGPUBatchInvariantLogits|TestGPUCacheBatchInvariant|TestGPUGraphReplaySameBits' X=1
warm() { local n=$1; shift; ( timeout 150 "$@" > $R/warm_$n.md 2>&1; echo "warm_$n rc=$? $(el)s" >> $R/times.txt ) & }
WG="--grid 1x8192,1x32768"
warm n0 env BITDECODE_CACHE_DIR=$W/c0 BITDECODE_PTXAS_VERBOSE=1 BITDECODE_DECODE_SEQLEAN=0 $N bench attn --device cuda --batch-invariant --kv int2,int4,k4v2 $WG
warm n env BITDECODE_CACHE_DIR=$W/cn BITDECODE_PTXAS_VERBOSE=1 $N bench attn --device cuda --batch-invariant --kv int2,int4,k4v2 $WG
warm n1 env BITDECODE_CACHE_DIR=$W/c1 BITDECODE_PTXAS_VERBOSE=1 BITDECODE_DECODE_SEQLEAN=1 $N bench attn --device cuda --batch-invariant --kv int2,int4,k4v2 $WG
warm mm env BITDECODE_CACHE_DIR=$W/cm BITDECODE_BATCH_INVARIANT=1 BITDECODE_PTXAS_VERBOSE=1 $M bench model --batch 1 --ctx 32k --kv int2 --steps 2 --no-linears
warm mn env BITDECODE_CACHE_DIR=$W/cmn BITDECODE_BATCH_INVARIANT=1 BITDECODE_PTXAS_VERBOSE=1 $N bench model --batch 1 --ctx 32k --kv int2 --steps 2 --no-linears
wait
pack
END=290
step() { local n=$1 lim=$2; shift 2; if [ $(el) -lt $lim ]; then timeout $(( END - $(el) )) "$@" > $R/$n.md 2>&1; echo "$n rc=$? $(el)s" >> $R/times.txt; else echo "$n skipped at $(el)s" >> $R/times.txt; fi; pack; }
A="bench attn --device cuda --batch-invariant"
G="--grid 1x8192,1x32768,1x131072,8x32768,100x32768"
step a1 200 env BITDECODE_CACHE_DIR=$W/c0 BITDECODE_DECODE_SEQLEAN=0 $N $A --kv int2,int4,k4v2 $G
step b1 230 env BITDECODE_CACHE_DIR=$W/cn $N $A --kv int2,int4,k4v2 $G
step a2 245 env BITDECODE_CACHE_DIR=$W/c0 BITDECODE_DECODE_SEQLEAN=0 $N $A --kv int2 $G
step b2 260 env BITDECODE_CACHE_DIR=$W/cn $N $A --kv int2 $G
step c1 262 env BITDECODE_CACHE_DIR=$W/c1 BITDECODE_DECODE_SEQLEAN=1 $N $A --kv int4,k4v2,int2 --grid 1x8192,1x131072,8x32768,100x32768
step m_main 272 env BITDECODE_CACHE_DIR=$W/cm BITDECODE_BATCH_INVARIANT=1 $M bench model --batch max --ctx 32k --kv int2 --steps 8 --no-linears
step m_new 281 env BITDECODE_CACHE_DIR=$W/cmn BITDECODE_BATCH_INVARIANT=1 $N bench model --batch max --ctx 32k --kv int2 --steps 8 --no-linears
pack
cat $R/times.txt $R/gpu.txt
grep -h -- '--- \(PASS\|FAIL\)\|^FAIL\|^ok\|panic' $R/t_*.log | grep -v '^    ---' | head -30
for f in a1 b1 a2 b2 c1; do echo "== $f"; grep -h 'read ceiling\|^  auto' $R/$f.md | sed 's/  */ /g' | cut -c1-120; done
for f in m_main m_new; do echo "== $f"; grep -v '^$' $R/$f.md | tail -3 | cut -c1-200; done
for f in warm_n0 warm_n warm_n1 warm_mm warm_mn; do echo "== $f"; grep -h "registers\|spill\|decode_mma<" $R/$f.md | grep -A2 "decode_mma<" | grep -v "^--\|detected" | sed 's/ptxas *//' | cut -c1-140 | head -18; done
