#!/bin/bash
# Session 21 (bilin2), the one call: linear.cu's narrow-kernel L2 knobs (BITDECODE_LINEAR_L2_FETCH:
# .L2::256B weight loads; BITDECODE_LINEAR_L2_PREFETCH: each warp's k-block two rounds ahead prefetched
# into the L2). Tests (parallel, knobs on in the backend's), then the A/B: bench gemv --rows 1 in the
# batch-invariant mode (linear.cu with the backend's settings vs gemv.cu) per knob, alternated; the
# batch-invariant 8B step at B = 1 (8K int4 KV, 128K cache) base / off / l2 / pf / both, alternated;
# the fast path once (base and new). Binaries in .gpu-bilin2/a.tar.xz (bitdecode.base = main 60277b4).
set -o pipefail
cd .gpu-bilin2; G=$PWD; R=$OUT/r; mkdir -p $R
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
tst 150 tk kernels.test '^(TestLinear.*|TestGridDependentKernelsWait)$' gpu/kernels X=0
tst 150 tb gpu.test '^(TestLinear.*|TestBatchInvariantLinear|TestFoldSwiGLU|TestFoldRoPE)$' backend/gpu "BITDECODE_LINEAR_L2_FETCH=1 BITDECODE_LINEAR_L2_PREFETCH=1"
tst 150 tg gpukv.test '^(TestGPUBatchInvariantLogits|TestGPUBatchInvariantScheduler|TestGPUCacheBatchInvariant)$' kvcache/gpukv X=0
BI=BITDECODE_BATCH_INVARIANT=1
L2=BITDECODE_LINEAR_L2_FETCH=1
PF=BITDECODE_LINEAR_L2_PREFETCH=1
W="--ctx 8k --kv int4 --no-linears --steps 2 --cache-len 128k --batch 1"
( env $BI timeout 100 ./bitdecode.base bench model $W > $R/warm_b.log 2>&1; t warm_b
  env $BI timeout 60 ./bitdecode bench model $W > $R/warm_n.log 2>&1; t warm_n ) &
wait; t tests; snap
M="--ctx 8k --kv int4 --no-linears --steps 32 --cache-len 128k --batch 1"
for rep in 1 2; do
  for v in off l2 pf both; do
    case $v in off) E=$BI;; l2) E="$BI $L2";; pf) E="$BI $PF";; both) E="$BI $L2 $PF";; esac
    env $E timeout 25 ./bitdecode bench gemv --rows 1 > $R/gemv_${v}_$rep.log 2>&1; t gemv_${v}_$rep
  done
  snap
  [ $(( $(date +%s) - T0 )) -gt 150 ] && break
done
for rep in 1 2; do
  env $BI timeout 20 ./bitdecode.base bench model $M > $R/m_base_$rep.log 2>&1; t m_base_$rep
  for v in off l2 pf both; do
    case $v in off) E=$BI;; l2) E="$BI $L2";; pf) E="$BI $PF";; both) E="$BI $L2 $PF";; esac
    env $E timeout 20 ./bitdecode bench model $M > $R/m_${v}_$rep.log 2>&1; t m_${v}_$rep
  done
  snap
  [ $(( $(date +%s) - T0 )) -gt 165 ] && break
done
timeout 15 ./bitdecode bench model $M > $R/m_fast_new.log 2>&1; t m_fast_new
timeout 15 ./bitdecode.base bench model $M > $R/m_fast_base.log 2>&1; t m_fast_base
snap
for f in $R/t?.log; do echo "== $(basename $f): $(grep -c -- '--- FAIL' $f) FAIL, $(grep -c -- '--- PASS' $f) PASS, $(grep -c -- '--- SKIP' $f) SKIP, $(tail -1 $f)"; done
grep -h -- "--- FAIL" $R/t?.log | head
grep -H "read ceiling\|^linear \(o\|q/o\|qkv\|gate+up\|down\|lm_head\)" $R/gemv_*.log | sed 's|.*/r/||' | cut -c1-150
grep -H "| int4" $R/m_*.log | sed 's|.*/r/||' | awk -F'|' '{print $1, $8, $9}'
cat $R/times.txt
