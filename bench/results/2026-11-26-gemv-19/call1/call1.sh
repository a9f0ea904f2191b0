#!/bin/bash
# s19-gemv call 1 (2026-11-26): gemv.cu v12's stream kernel (BITDECODE_GEMV_STREAM). The GPU tests (stream on in
# backend/gpu's), bench gemv --rows 1 --variants (new binary: default rows and the stream rows), then bench model
# B = 1 (1K, 32K, 128K; fp16, int4, int2) for main's binary and this branch's modes alternated twice, max batch
# fp16 32K once each, and ncu of the stream step at fp16 32K if time is left.
set -o pipefail
T0=$(date +%s)
cd .gpu-gemv; R=/tmp/r; mkdir -p $R
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
T=180
tst() { local n=$1 b=$2 re=$3; shift 3; (env "$@" timeout $T ./$b -test.v -test.timeout ${T}s -test.run "$re" > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log) & }
tst kernels kernels.test '^(TestGEMVStream|TestGEMVStreamStage|TestGEMVStreamConstants|TestGEMVStreamGeometry|TestGEMVMatchesReference|TestGEMVGroups|TestGEMVRoPE|TestGEMVSwiGLU|TestGEMVDependentLaunch|TestGEMVDepths|TestGEMVEarlyKinds|TestGridDependentKernelsWait)$' X=0
tst backend backend.test '^(TestLinearGraphReplay|TestFoldSwiGLU|TestFoldRoPE|TestFoldSwiGLUJoined|TestGroupGraphReplay|TestEarlyNormInputs|TestParseOptions|TestBatchInvariantLinear)$' BITDECODE_GEMV_STREAM=plain,rope BITDECODE_GEMV_EARLY=plain,rope
tst gpukv gpukv.test '^(TestGPUGraphReplaySameBits)$' X=0
W="--batch 1 --ctx 1k --kv fp16 --steps 2 --no-linears"
(timeout $T ./bitdecode-base bench model $W > $R/warm_base.log 2>&1; echo "rc=$?" >> $R/warm_base.log) &
(timeout $T ./bitdecode bench model $W > $R/warm_new.log 2>&1; echo "rc=$?" >> $R/warm_new.log) &
(BITDECODE_GEMV_STREAM=plain,rope timeout $T ./bitdecode bench model $W > $R/warm_newS.log 2>&1; echo "rc=$?" >> $R/warm_newS.log) &
wait; t tests; snap
timeout 120 ./bitdecode bench gemv --rows 1 --variants --json $R/variants.json > $R/variants.log 2>&1; echo "rc=$?" >> $R/variants.log
t variants; snap
run() { # name binary args env...
  local v=$1 bin=$2 a=$3; shift 3
  env "$@" timeout 90 ./$bin bench model $a --no-linears --json $R/b_${v}.json > $R/b_${v}.log 2>&1; echo "rc=$?" >> $R/b_${v}.log
  t "$v"
}
FULL="--batch 1 --ctx 1k,32k,128k --kv fp16,int4,int2 --steps 32"
for i in 1 2; do
  run base_$i bitdecode-base "$FULL" X=0
  run new_$i bitdecode "$FULL" X=0
  run sP_$i bitdecode "$FULL" BITDECODE_GEMV_STREAM=plain
  run sPR_$i bitdecode "$FULL" BITDECODE_GEMV_STREAM=plain,rope
  run sPR16x2_$i bitdecode "$FULL" BITDECODE_GEMV_STREAM=plain,rope,kib=16,ctas=2
  run sPRe_$i bitdecode "$FULL" BITDECODE_GEMV_STREAM=plain,rope BITDECODE_GEMV_EARLY=plain,rope
  snap
done
MB="--batch max --ctx 32k --kv fp16 --steps 8"
run mbbase_1 bitdecode-base "$MB" X=0
run mbsPR_1 bitdecode "$MB" BITDECODE_GEMV_STREAM=plain,rope
snap
nc() { # name binary timeout args env...
  local v=$1 bin=$2 to=$3 a=$4; shift 4
  env "$@" timeout $to ncu --graph-profiling node --cache-control none --clock-control none --launch-count 6000 \
    --metrics gpu__time_duration.sum --csv ./$bin bench model $a --batch 1 --steps 2 --no-linears > $R/ncu_$v.csv 2> $R/ncu_$v.err
  echo "rc=$?" >> $R/ncu_$v.err; python3 ncu_step.py $R/ncu_$v.csv > $R/ncu_$v.step.txt 2>&1; gzip $R/ncu_$v.csv
  t ncu_$v; snap
}
[ $(el) -lt 400 ] && nc sPR bitdecode 80 "--ctx 32k --kv fp16" BITDECODE_GEMV_STREAM=plain,rope
[ $(el) -lt 460 ] && nc base bitdecode-base 80 "--ctx 32k --kv fp16" X=0
t end; snap
grep -h "read ceiling" $R/b_base_1.log | head -1
grep -h "^gemv" $R/variants.log | grep -v "depth  [48]\|depth 16" | head -60
python3 tab.py $R base
for f in $R/b_mb*.log; do echo "$(basename $f .log): $(grep -h 'ms/step' $f | sed 's/.*ctx *//;s/ TP 1//;s/floor.*(/(/' | tr '\n' ' ')"; done
for f in $R/b_*_1.log; do echo "$(basename $f): $(grep -h "CUDA graphs" $f | sed 's/.*rank 0: //;s/(rank.*//' | sort | uniq -c | tr -s ' ' | tr '\n' ';')"; done | head -8
grep -h "^--- FAIL\|^--- PASS\|^--- SKIP\|^FAIL\|^ok\|rc=\|panic" $R/kernels.log $R/backend.log $R/gpukv.log | head -60
grep -h "rc=" $R/warm_*.log $R/variants.log
for f in $R/ncu_*.step.txt; do echo "== $f"; head -40 $f; done
cat $R/times.txt
