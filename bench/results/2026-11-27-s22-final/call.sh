#!/bin/bash
# Session 22, lead: the merged tree (283b71c + q4dot later) against the session's start (fd512dc):
# the batch-invariant step at 55 x 32K and one sequence (linear.cu v7 + per-sequence splits, cap 17),
# DEC k 64 / k 0 (gemv_q6_dec's tail rule), then the GPU tests the session's changes touch.
ROOT=$PWD; cd .gpu-lead; G=$PWD; R=$G/r; mkdir -p $R
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('a.tar.xz')).extractall('.')
"
chmod +x base new *.test
export BITDECODE_CACHE_DIR=$G/cache
snap() { (cd $G && tar czf $OUT/results.tmp r && mv $OUT/results.tmp $OUT/results.tgz); }
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
t() { echo "$(date -u +%T) $(el)s $*" >> $R/times.txt; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } > $R/gpu.txt 2>&1
W="--ctx 1k --kv int4,fp16 --batch 55 --steps 2 --no-linears"
for v in base new; do
  ( BITDECODE_BATCH_INVARIANT=1 timeout 100 ./$v bench model $W > $R/warm_bi_$v.log 2>&1; t warm_bi_$v ) &
  ( BITDECODE_DEC_RESIDUAL=device timeout 100 ./$v bench model --ctx 1k --kv int4 --no-linears --weights int4 --dec-k 64 --steps 2 > $R/warm_dec_$v.log 2>&1; t warm_dec_$v ) &
done
wait; snap
BI=BITDECODE_BATCH_INVARIANT=1
M="--ctx 32k --kv int4 --batch 55 --steps 16 --no-linears"
for rep in 1 2; do for v in base new; do
  env $BI timeout 40 ./$v bench model $M > $R/m55_bi_${v}_$rep.log 2>&1; t m55_bi_${v}_$rep
done; done
timeout 40 ./new bench model $M > $R/m55_fast_new.log 2>&1; t m55_fast_new
snap
O="--ctx 8k,32k,128k --kv int4 --batch 1 --steps 32 --cache-len 128k --no-linears"
for rep in 1 2; do for v in base new; do
  env $BI timeout 50 ./$v bench model $O > $R/m1_bi_${v}_$rep.log 2>&1; t m1_bi_${v}_$rep
done; done
timeout 50 ./new bench model $O > $R/m1_fast_new.log 2>&1; t m1_fast_new
snap
D="--ctx 1k --kv int4 --no-linears --weights int4 --steps 32"
for v in base new; do for k in 0 64; do
  BITDECODE_DEC_RESIDUAL=device timeout 40 ./$v bench model $D --dec-k $k > $R/dec_${v}_k$k.log 2>&1; t dec_${v}_k$k
done; done
snap
left=$(( 570 - $(el) )); [ $left -gt 330 ] && left=330
tst() { local name=$1 bin=$2 dir=$3 run=$4; (cd $ROOT/$dir && timeout $left $G/$bin -test.v -test.timeout ${left}s -test.run "$run" > $R/$name.log 2>&1; echo "rc=$?" >> $R/$name.log; t $name) & }
tst t_ref kernels.test gpu/kernels '^TestGPUDecodeMatchesReference$'
tst t_win kernels.test gpu/kernels '^TestGPUDecodeWindowMatchesReference$'
tst t_long kernels.test gpu/kernels '^TestGPUDecodeLong$'
tst t_dec kernels.test gpu/kernels '^(TestGPUDecodeSeqSplits|TestSeqSplitLen|TestGPUDecodeOneSplitMatchesCombine|TestGPUDecodeLookAheadMatchesRefold|TestGPUDecodeRingMatchesPipeline|TestGPUDecodeTimelineSameBits|TestGPUDecodeOneSMTile|TestGEMVQ6DEC.*|TestDECSelectMatchesWQ)$'
tst t_lin kernels.test gpu/kernels '^(TestLinear.*|TestGridDependentKernelsWait)$'
tst t_kv gpukv.test kvcache/gpukv '^(TestGPUCacheBatchInvariant|TestGPUBatchInvariantLogits|TestGPUBatchInvariantScheduler|TestGPUGraphReplaySameBits|TestGPUCacheMatchesReference|TestGPUModelDECLists)$'
tst t_bg bgpu.test backend/gpu '^(TestLinear.*|TestBatchInvariantLinear|TestQuantLinearQ6DEC|TestQ6DEC.*)$'
wait; snap
{
for f in $R/t_*.log; do echo "== $(basename $f): $(grep -c -- '--- FAIL' $f) FAIL, $(grep -c -- '--- PASS' $f) PASS, $(grep -c -- '--- SKIP' $f) SKIP, $(tail -1 $f)"; done
grep -h -- "--- FAIL\|panic" $R/t_*.log | head -20
grep -h "read ceiling" $R/m55_*.log | head -2
for f in $R/m55_*.log $R/m1_*.log $R/dec_*.log; do grep -H "| int4 |\|| fp16 |" $f | sed 's|.*/r/||' | cut -d'|' -f1-10; done
cat $R/times.txt
} > $OUT/summary.txt 2>&1
cat $OUT/summary.txt
