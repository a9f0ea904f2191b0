#!/bin/bash
# Session 21 (bilin), call 2 as planned, NOT RUN (budget_left_s fell under the task's floor of 700 while
# another helper held the machine). Needs s21-bilin with l2fetch.patch applied (the BITDECODE_LINEAR_L2_FETCH
# knob) in .gpu-bilin/a.tar.xz beside bitdecode.base (main 5c86472), kernels.test, gpu.test, gpukv.test.
# Tests, then the A/B: the batch-invariant (BI) step at B = 1 (1K and 8K in a 128K cache, int4 and fp16
# KV) and the fast path's, base and new alternated, new with BITDECODE_LINEAR_L2_FETCH=1 and with
# BITDECODE_NO_LINEAR_PERSISTENT=1; BI at B = 16 (8K); ncu of new's BI step (default and L2 fetch) and
# DRAM/L2 counters of linear.cu's and gemv.cu's launches.
set -o pipefail
cd .gpu-bilin; G=$PWD; R=$OUT/r; mkdir -p $R
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('a.tar.xz')).extractall('.')
"
chmod +x bitdecode* *.test
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
T0=$(date +%s)
t() { echo "$(date -u +%T) $(( $(date +%s) - T0 ))s $*" >> $R/times.txt; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } > $R/gpu.txt 2>&1
export BITDECODE_CACHE_DIR=$G/cache
mkdir -p $G/kvcache/gpukv $G/backend/gpu $G/gpu/kernels
tst() { local to=$1; shift; (cd $G/$4 && env $5 timeout $to $G/$2 -test.v -test.timeout ${to}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) & }
tst 175 tk kernels.test '^(TestLinear.*|TestGridDependentKernelsWait|TestRoPE.*|TestSwiGLU|TestGEMVSwiGLU|TestGEMVRoPE)$' gpu/kernels X=0
tst 175 tb gpu.test '^(TestFoldSwiGLU|TestFoldRoPE|TestEarlyNormInputs|TestEarlyNormInputsDecision|TestLinearQueuedOps|TestLinear|TestLinearGroup|TestLinearDeterministic|TestBatchInvariantLinear|TestLinearGraphReplay)$' backend/gpu X=0
tst 175 tb2 gpu.test '^(TestFoldSwiGLU|TestFoldRoPE|TestEarlyNormInputs|TestLinearGroup|TestBatchInvariantLinear|TestLinearGraphReplay)$' backend/gpu "BITDECODE_BATCH_INVARIANT=1 BITDECODE_LINEAR_L2_FETCH=1"
tst 175 tg gpukv.test '^(TestGPUBatchInvariantLogits|TestGPUBatchInvariantScheduler|TestGPUCacheBatchInvariant|TestGPUGraphReplaySameBits)$' kvcache/gpukv X=0
W="--ctx 8k --kv int4 --no-linears --steps 2 --cache-len 128k --batch 1"
( BITDECODE_BATCH_INVARIANT=1 timeout 120 ./bitdecode.base bench model $W > $R/warm_bbi.log 2>&1; t warm_bbi
  BITDECODE_BATCH_INVARIANT=1 timeout 60 ./bitdecode bench model $W > $R/warm_nbi.log 2>&1; t warm_nbi
  timeout 60 ./bitdecode.base bench model $W > $R/warm_bf.log 2>&1; t warm_bf
  for v in nbi nbil2; do
    case $v in nbi) E=BITDECODE_BATCH_INVARIANT=1;; nbil2) E="BITDECODE_BATCH_INVARIANT=1 BITDECODE_LINEAR_L2_FETCH=1";; esac
    env $E timeout 40 ncu --graph-profiling node --cache-control none --clock-control none --launch-count 4000 \
      --metrics gpu__time_duration.sum --csv ./bitdecode bench model $W > $R/ncu_$v.csv 2> $R/ncu_$v.err
    echo "rc=$?" >> $R/ncu_$v.err; python3 ncu_step.py $R/ncu_$v.csv > $R/ncu_$v.txt 2>&1; gzip -f $R/ncu_$v.csv; t ncu_$v
  done ) &
wait; t tests; snap
M="--ctx 1k,8k --kv int4,fp16 --no-linears --steps 32 --cache-len 128k --batch 1"
B16="--ctx 8k --kv int4 --no-linears --steps 32 --batch 16"
BI=BITDECODE_BATCH_INVARIANT=1
for rep in 1 2 3; do
  env $BI timeout 40 ./bitdecode.base bench model $M > $R/bbi_$rep.log 2>&1; t bbi$rep
  env $BI timeout 40 ./bitdecode bench model $M > $R/nbi_$rep.log 2>&1; t nbi$rep
  env $BI BITDECODE_LINEAR_L2_FETCH=1 timeout 40 ./bitdecode bench model $M > $R/nbil2_$rep.log 2>&1; t nbil2$rep
  timeout 40 ./bitdecode.base bench model $M > $R/bf_$rep.log 2>&1; t bf$rep
  timeout 40 ./bitdecode bench model $M > $R/nf_$rep.log 2>&1; t nf$rep
  snap
  [ $(( $(date +%s) - T0 )) -gt 220 ] && break
done
for rep in 1 2; do
  [ $(( $(date +%s) - T0 )) -gt 240 ] && break
  env $BI BITDECODE_NO_LINEAR_PERSISTENT=1 timeout 30 ./bitdecode bench model $M > $R/nbinp_$rep.log 2>&1; t nbinp$rep
  env $BI timeout 30 ./bitdecode.base bench model $B16 > $R/bbi16_$rep.log 2>&1; t bbi16_$rep
  env $BI timeout 30 ./bitdecode bench model $B16 > $R/nbi16_$rep.log 2>&1; t nbi16_$rep
  env $BI BITDECODE_LINEAR_L2_FETCH=1 timeout 30 ./bitdecode bench model $B16 > $R/nbil216_$rep.log 2>&1; t nbil216_$rep
  snap
done
MET=gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,sm__warps_active.avg.pct_of_peak_sustained_active,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum
for v in nbi nbil2 nf; do
  [ $(( $(date +%s) - T0 )) -gt 250 ] && break
  case $v in nbi) E=$BI; K=linear_f16;; nbil2) E="$BI BITDECODE_LINEAR_L2_FETCH=1"; K=linear_f16;; nf) E=X=0; K=gemv_f16;; esac
  env $E timeout 25 ncu --graph-profiling node --clock-control none -k regex:$K --launch-skip 40 --launch-count 10 \
    --metrics $MET --csv ./bitdecode bench model $W > $R/ncum_$v.csv 2> $R/ncum_$v.err; echo "rc=$?" >> $R/ncum_$v.err; t ncum_$v
done
snap
for f in $R/t*.log; do echo "== $(basename $f): $(grep -c -- '--- FAIL' $f) FAIL, $(grep -c -- '--- PASS' $f) PASS, $(grep -c -- '--- SKIP' $f) SKIP, $(tail -1 $f)"; done
grep -h -- "--- FAIL" $R/t*.log | head
grep -H "ms/step" $R/b*_?.log $R/n*_?.log | sed 's|.*/r/||;s|(cache of 131072) ||;s|fp16     ||;s| TP 1||' | head -90
grep -h "^## step\|rc=" $R/ncu_*.txt $R/ncu_*.err | head
cat $R/times.txt
