#!/bin/bash
# Session 22 (bistep), call 1: where the batch-invariant step's time goes at 55 x 32K int4, and what a
# longer fixed split would give (BITDECODE_BI_SPLIT, a call-1-only knob on main 8a50c90's code).
cd .gpu-bistep; G=$PWD; R=$OUT/r; mkdir -p $R
export BITDECODE_CACHE_DIR=$G/cache
chmod +x bitdecode
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
t() { echo "$(date -u +%T) $(el)s $*" >> $R/times.txt; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } > $R/gpu.txt 2>&1
# warm the NVRTC cache (both modes, both formats)
( timeout 100 ./bitdecode bench model --ctx 1k --kv int4,fp16 --batch 2 --steps 2 --no-linears > $R/warm_f.log 2>&1; t warm_f ) &
( BITDECODE_BATCH_INVARIANT=1 timeout 100 ./bitdecode bench model --ctx 1k --kv int4,fp16 --batch 2 --steps 2 --no-linears > $R/warm_bi.log 2>&1; t warm_bi ) &
wait; snap
M="--ctx 32k --kv int4 --batch 55 --steps 16 --no-linears"
for rep in 1 2; do
  timeout 40 ./bitdecode bench model $M > $R/m55_fast_$rep.log 2>&1; t m55_fast_$rep
  for s in 512 1024 2048 4096 8192; do
    BITDECODE_BATCH_INVARIANT=1 BITDECODE_BI_SPLIT=$s timeout 40 ./bitdecode bench model $M > $R/m55_bi${s}_$rep.log 2>&1; t m55_bi${s}_$rep
  done
  snap
done
O="--ctx 8k,32k,128k --kv int4,fp16 --batch 1 --steps 32 --cache-len 128k --no-linears"
timeout 60 ./bitdecode bench model $O > $R/m1_fast.log 2>&1; t m1_fast
for s in 512 1024 2048 4096; do
  [ $(el) -gt 170 ] && break
  BITDECODE_BATCH_INVARIANT=1 BITDECODE_BI_SPLIT=$s timeout 60 ./bitdecode bench model $O > $R/m1_bi$s.log 2>&1; t m1_bi$s
done
snap
F="--ctx 32k --kv fp16 --batch max --steps 16 --no-linears"
timeout 40 ./bitdecode bench model $F > $R/mf_fast.log 2>&1; t mf_fast
for s in 512 1024 2048 4096; do
  [ $(el) -gt 190 ] && break
  BITDECODE_BATCH_INVARIANT=1 BITDECODE_BI_SPLIT=$s timeout 40 ./bitdecode bench model $F > $R/mf_bi$s.log 2>&1; t mf_bi$s
done
snap
N="--ctx 32k --kv int4 --batch 55 --steps 1 --no-linears"
for v in bi fast; do
  left=$(( 280 - $(el) )); [ $left -lt 30 ] && break
  E=X=0; [ $v = bi ] && E=BITDECODE_BATCH_INVARIANT=1
  env $E timeout $left ncu --graph-profiling node --cache-control none --clock-control none --launch-count 4000 \
    --metrics gpu__time_duration.sum --csv ./bitdecode bench model $N > $R/ncu_$v.csv 2> $R/ncu_$v.err
  echo "rc=$?" >> $R/ncu_$v.err; python3 ncu_step.py $R/ncu_$v.csv > $R/ncu_$v.txt 2>&1; gzip -f $R/ncu_$v.csv; t ncu_$v; snap
done
grep -h "read ceiling" $R/m55_*.log | head -3
for f in $R/m55_*.log $R/m1_*.log $R/mf_*.log; do grep -H "| fp16 |" $f | sed 's|.*/r/||' | cut -d'|' -f1,4,5,6,8,9,10; done
head -30 $R/ncu_bi.txt; head -30 $R/ncu_fast.txt
cat $R/times.txt
