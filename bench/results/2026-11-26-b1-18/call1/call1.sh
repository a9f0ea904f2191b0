#!/bin/bash
# s18-b1 call 1 (2026-11-26): ops.cu's kernels trigger their dependents before they wait (v28a) and gemv.cu's
# L2 prefetch of later CTAs' weights (BITDECODE_GEMV_L2): the GPU tests, then bench model B = 1 (1K, 32K, 128K;
# fp16, int4, int2) for main's binary, this branch (trigger first, ops.cu define 1) and the same with the define 0
# ("notf"), knobs by environment, alternated twice; then ncu of main's step at 32K and 128K (census).
set -o pipefail
T0=$(date +%s)
cd .gpu-b1; R=/tmp/r; mkdir -p $R
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
cd b; cp ../call1.sh $R/
chmod +x bitdecode* *.test
snap() { (cd /tmp && tar czf $OUT/results.tmp r && mv $OUT/results.tmp $OUT/results.tgz); }
el() { echo $(( $(date +%s) - T0 )); }
t() { echo "$(date -u +%T) $(el) s $*" >> $R/times.txt; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } > $R/times.txt 2>&1; t extracted
T=200
tst() { local n=$1 b=$2 re=$3; shift 3; (env "$@" timeout $T ./$b -test.v -test.timeout ${T}s -test.run "$re" > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log) & }
tst kernels kernels.test '^(TestGEMVL2Ahead|TestGEMVDependentLaunch|TestGEMVMatchesReference|TestGEMVGroups|TestGEMVSwiGLU|TestGEMVRoPE|TestGridDependentKernelsWait|TestGEMVL2Kinds|TestGEMVEarlyKinds|TestOpsAddRMSNorm|TestOpsConvert|TestOpsHadamard|TestOpsElementwise|TestOpsRoPEQK)$' X=0
tst backend backend.test '^(TestLinearGraphReplay|TestFoldSwiGLU|TestFoldRoPE|TestFoldSwiGLUJoined|TestGroupGraphReplay|TestEarlyNormInputs|TestParseOptions|TestBatchInvariantLinear)$' BITDECODE_GEMV_L2=plain,rope,swiglu BITDECODE_GEMV_EARLY=plain,rope,swiglu
tst gpukv gpukv.test '^(TestGPUGraphReplaySameBits)$' BITDECODE_GEMV_L2=plain,rope,swiglu
for b in bitdecode-base bitdecode bitdecode-notf; do
  (timeout $T ./$b bench model --batch 1 --ctx 1k --kv fp16,int4 --steps 2 --no-linears > $R/warm_$b.log 2>&1; echo "rc=$?" >> $R/warm_$b.log) &
done
wait; t tests; snap
run() { # name binary, env...
  local v=$1 bin=$2; shift 2
  env "$@" timeout 60 ./$bin bench model $FULL --no-linears --json $R/b_${v}.json > $R/b_${v}.log 2>&1; echo "rc=$?" >> $R/b_${v}.log
  t "$v"
}
FULL="--batch 1 --ctx 1k,32k,128k --kv fp16,int4,int2 --steps 32"
for i in 1 2; do
  run base_$i bitdecode-base X=0
  run new_$i bitdecode X=0
  run newEp_$i bitdecode BITDECODE_GEMV_EARLY=plain,rope
  run newL2p_$i bitdecode BITDECODE_GEMV_L2=plain
  run newEpL2p_$i bitdecode BITDECODE_GEMV_EARLY=plain,rope BITDECODE_GEMV_L2=plain
  run newL2p32_$i bitdecode BITDECODE_GEMV_L2=plain:32
  run newL2all_$i bitdecode BITDECODE_GEMV_L2=plain,rope,swiglu
  run newEallL2all_$i bitdecode BITDECODE_GEMV_EARLY=plain,rope,swiglu BITDECODE_GEMV_L2=plain,rope,swiglu
  run notf_$i bitdecode-notf X=0
  run notfL2p_$i bitdecode-notf BITDECODE_GEMV_L2=plain
  run baseEp_$i bitdecode-base BITDECODE_GEMV_EARLY=plain,rope
  snap
done
nc() { # name binary timeout args env...
  local v=$1 bin=$2 to=$3 a=$4; shift 4
  env "$@" timeout $to ncu --graph-profiling node --cache-control none --clock-control none --launch-count 6000 \
    --metrics gpu__time_duration.sum --csv ./$bin bench model $a --batch 1 --steps 2 --no-linears > $R/ncu_$v.csv 2> $R/ncu_$v.err
  echo "rc=$?" >> $R/ncu_$v.err; python3 ncu_step.py $R/ncu_$v.csv > $R/ncu_$v.step.txt 2>&1; gzip $R/ncu_$v.csv
  t ncu_$v; snap
}
[ $(el) -lt 330 ] && nc base bitdecode-base 100 "--ctx 32k,128k --kv fp16,int4,int2" X=0
t end; snap
grep -h "read ceiling" $R/b_base_1.log | head -2
for f in $R/b_*.log; do echo "$(basename $f .log): $(grep -h 'ms/step' $f | sed 's/.*ctx *//;s/ B 1 TP 1//;s/ (.*tok\/s)//;s/floor.*(/(/' | tr '\n' ' ')"; done
for f in $R/b_*.log; do echo "$(basename $f): $(grep -h "CUDA graphs" $f | sed 's/.*rank 0: //;s/(rank.*//' | sort | uniq -c | tr -s ' ' | tr '\n' ';')"; done | sort | uniq -c -f1 | head -5
grep -h "^--- FAIL\|^--- PASS\|^--- SKIP\|^FAIL\|^ok\|rc=\|panic" $R/kernels.log $R/backend.log $R/gpukv.log | head -60
grep -h "rc=" $R/warm_*.log $R/ncu_*.err
cat $R/times.txt
