#!/bin/bash
# Session 22 (bistep), call 2: per-sequence decode splits in the batch-invariant mode (branch s22-bistep)
# against main 8a50c90: the step A/B (alternated: base, new, base, new) at int4 55 x 32K, one sequence of
# 8K/32K/128K in a 128K cache (int4, fp16), fp16 15 x 32K; then the GPU tests (parallel processes).
ROOT=$PWD; cd .gpu-bistep; G=$PWD; R=$G/r; mkdir -p $R
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
  ( timeout 100 ./$v bench model $W > $R/warm_f_$v.log 2>&1; t warm_f_$v ) &
  ( BITDECODE_BATCH_INVARIANT=1 timeout 100 ./$v bench model $W > $R/warm_bi_$v.log 2>&1; t warm_bi_$v ) &
done
wait; snap
BI=BITDECODE_BATCH_INVARIANT=1
M="--ctx 32k --kv int4 --batch 55 --steps 16 --no-linears"
for rep in 1 2; do for v in base new; do
  env $BI timeout 40 ./$v bench model $M > $R/m55_bi_${v}_$rep.log 2>&1; t m55_bi_${v}_$rep
done; done
for v in new base; do timeout 40 ./$v bench model $M > $R/m55_fast_$v.log 2>&1; t m55_fast_$v; done
snap
O="--ctx 8k,32k,128k --kv int4,fp16 --batch 1 --steps 32 --cache-len 128k --no-linears"
for rep in 1 2; do for v in base new; do
  env $BI timeout 60 ./$v bench model $O > $R/m1_bi_${v}_$rep.log 2>&1; t m1_bi_${v}_$rep
done; done
timeout 60 ./new bench model $O > $R/m1_fast_new.log 2>&1; t m1_fast_new
F="--ctx 32k --kv fp16 --batch max --steps 16 --no-linears"
for v in base new; do env $BI timeout 40 ./$v bench model $F > $R/mf_bi_$v.log 2>&1; t mf_bi_$v; done
snap
left=$(( 288 - $(el) )); [ $left -gt 200 ] && left=200
tst() { local name=$1 bin=$2 dir=$3 run=$4; (cd $ROOT/$dir && timeout $left $G/$bin -test.v -test.timeout ${left}s -test.run "$run" > $R/$name.log 2>&1; echo "rc=$?" >> $R/$name.log; t $name) & }
tst t_ref kernels.test gpu/kernels '^TestGPUDecodeMatchesReference$'
tst t_dec kernels.test gpu/kernels '^(TestGPUDecodeSeqSplits|TestSeqSplitLen|TestGPUDecodeOneSplitMatchesCombine|TestGPUDecodeLookAheadMatchesRefold|TestGPUDecodeRingMatchesPipeline|TestGPUDecodeTimelineSameBits|TestGPUDecodeOneSMTile)$'
tst t_long kernels.test gpu/kernels '^(TestGPUDecodeLong|TestGPUDecodeWindowMatchesReference)$'
tst t_kv gpukv.test kvcache/gpukv '^(TestGPUCacheBatchInvariant|TestGPUBatchInvariantLogits|TestGPUBatchInvariantScheduler|TestGPUGraphReplaySameBits|TestGPUCacheMatchesReference)$'
wait; snap
{
for f in $R/t_*.log; do echo "== $(basename $f): $(grep -c -- '--- FAIL' $f) FAIL, $(grep -c -- '--- PASS' $f) PASS, $(grep -c -- '--- SKIP' $f) SKIP, $(tail -1 $f)"; done
grep -h -- "--- FAIL\|panic" $R/t_*.log | head -20
grep -h "^--- \(PASS\|FAIL\)" $R/t_*.log
grep -h "read ceiling" $R/m55_*.log | head -2
for f in $R/m55_*.log $R/m1_*.log $R/mf_*.log; do grep -H "| fp16 |" $f | sed 's|.*/r/||' | cut -d'|' -f1,4,5,6,8,9,10; done
cat $R/times.txt
} > $OUT/summary.txt 2>&1
cat $OUT/summary.txt
