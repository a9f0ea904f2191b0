#!/bin/bash
# Session 22, bistep2 helper, call 1: main (base, f2b5946) against s22-bistep2 (new) in one call,
# alternated: the batch-invariant step at 55 x 32K (default, decode_mma's persistent grid
# BITDECODE_DECODE_UNITS=264/1056, the merge in its own launch BITDECODE_DECODE_FUSE=0) and one
# sequence in a 128K cache; then the GPU tests the change touches.
ROOT=$PWD; cd .gpu-bistep2; G=$PWD; R=$G/r; mkdir -p $R
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
BI=BITDECODE_BATCH_INVARIANT=1
W="--ctx 1k --kv int4 --batch 55 --steps 2 --no-linears"
( env $BI timeout 100 ./base bench model $W > $R/warm_base.log 2>&1; t warm_base ) &
( env $BI timeout 100 ./new bench model $W > $R/warm_new.log 2>&1; t warm_new ) &
( env $BI BITDECODE_DECODE_UNITS=264 timeout 100 ./new bench model $W > $R/warm_units.log 2>&1; t warm_units ) &
wait; snap
M="--ctx 32k --kv int4 --batch 55 --steps 16 --no-linears"
for rep in 1 2; do
  env $BI timeout 40 ./base bench model $M > $R/m55_base_$rep.log 2>&1; t m55_base_$rep
  env $BI timeout 40 ./new bench model $M > $R/m55_new_$rep.log 2>&1; t m55_new_$rep
  env $BI BITDECODE_DECODE_UNITS=264 timeout 40 ./new bench model $M > $R/m55_u264_$rep.log 2>&1; t m55_u264_$rep
  env $BI BITDECODE_DECODE_FUSE=0 timeout 40 ./base bench model $M > $R/m55_nofuse_$rep.log 2>&1; t m55_nofuse_$rep
done
env $BI BITDECODE_DECODE_UNITS=1056 timeout 40 ./new bench model $M > $R/m55_u1056_1.log 2>&1; t m55_u1056_1
timeout 40 ./new bench model $M > $R/m55_fast_new.log 2>&1; t m55_fast_new
snap
O="--ctx 8k,32k,128k --kv int4 --batch 1 --steps 32 --cache-len 128k --no-linears"
for rep in 1 2; do for v in base new; do
  env $BI timeout 50 ./$v bench model $O > $R/m1_${v}_$rep.log 2>&1; t m1_${v}_$rep
done; done
env $BI BITDECODE_DECODE_FUSE=0 timeout 50 ./base bench model $O > $R/m1_nofuse_1.log 2>&1; t m1_nofuse_1
snap
left=$(( 285 - $(el) )); [ $left -lt 60 ] && left=60
tst() { local name=$1 bin=$2 dir=$3 run=$4; (cd $ROOT/$dir && timeout $left $G/$bin -test.v -test.timeout ${left}s -test.run "$run" > $R/$name.log 2>&1; echo "rc=$?" >> $R/$name.log; t $name) & }
tst t_seq kernels.test gpu/kernels '^TestGPUDecodeSeqSplits$'
tst t_dec kernels.test gpu/kernels '^(TestSeqSplitLen|TestGPUDecodeOneSplitMatchesCombine|TestGPUDecodeTimelineSameBits)$'
tst t_kv1 gpukv.test kvcache/gpukv '^TestGPUCacheBatchInvariant$'
tst t_kv2 gpukv.test kvcache/gpukv '^TestGPUBatchInvariantLogits$'
tst t_kv3 gpukv.test kvcache/gpukv '^(TestGPUBatchInvariantScheduler|TestGPUGraphReplaySameBits)$'
wait; snap
{
for f in $R/t_*.log; do echo "== $(basename $f): $(grep -c -- '--- FAIL' $f) FAIL, $(grep -c -- '--- PASS' $f) PASS, $(grep -c -- '--- SKIP' $f) SKIP, $(tail -1 $f)"; done
grep -h -- "--- FAIL\|panic" $R/t_*.log | head -20
grep -h "read ceiling" $R/m55_*.log | head -3
for f in $R/m55_*.log $R/m1_*.log; do grep -H "| int4 " $f | sed 's|.*/r/||' | cut -d'|' -f1-9; done
cat $R/times.txt
} > $OUT/summary.txt 2>&1
cat $OUT/summary.txt
