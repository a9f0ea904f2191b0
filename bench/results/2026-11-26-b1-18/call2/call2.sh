#!/bin/bash
# s18-b1 call 2 (2026-11-26): v28b (only f16_to_f32_hadamard(_warp) trigger before they wait; o's, down's and
# lm_head's first loads early by default) and v28c (v28b + the KV appends trigger before they wait), against
# main, alternated three times at B = 1; v28b without the plain early loads (BITDECODE_GEMV_EARLY=rope); max
# batch at 32K once each; the GPU tests; ncu of main's int4 and int2 step at 32K (census).
set -o pipefail
T0=$(date +%s)
cd .gpu-b1; R=/tmp/r_b1; rm -rf $R; mkdir -p $R
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
cd b; cp ../call2.sh ../ncu_step.py $R/
chmod +x bitdecode* *.test
snap() { (cd /tmp && tar czf $OUT/results.tmp r_b1 && mv $OUT/results.tmp $OUT/results.tgz); }
el() { echo $(( $(date +%s) - T0 )); }
t() { echo "$(date -u +%T) $(el) s $*" >> $R/times.txt; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } > $R/times.txt 2>&1; t extracted
T=200
tst() { local n=$1 b=$2 re=$3; shift 3; (env "$@" timeout $T ./$b -test.v -test.timeout ${T}s -test.run "$re" > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log) & }
tst kernels kernels.test '^(TestGridDependentKernelsWait|TestGEMVEarlyKinds|TestGEMVDependentLaunch|TestGEMVMatchesReference|TestGEMVGroups|TestOpsConvert|TestOpsHadamard|TestOpsAddRMSNorm|TestOpsElementwise)$' X=0
tst backend backend.test '^(TestLinearGraphReplay|TestFoldSwiGLU|TestFoldRoPE|TestFoldSwiGLUJoined|TestGroupGraphReplay|TestEarlyNormInputs|TestParseOptions|TestBatchInvariantLinear)$' X=0
tst gpukv gpukv.test '^(TestGPUGraphReplaySameBits)$' X=0
for b in bitdecode-base bitdecode bitdecode-kvtf; do
  (timeout $T ./$b bench model --batch 1 --ctx 1k --kv fp16,int4,int2 --steps 2 --no-linears > $R/warm_$b.log 2>&1; echo "rc=$?" >> $R/warm_$b.log) &
done
wait; t tests; snap
run() { # name binary args, env...
  local v=$1 bin=$2 a=$3; shift 3
  env "$@" timeout 90 ./$bin bench model $a --no-linears --json $R/b_${v}.json > $R/b_${v}.log 2>&1; echo "rc=$?" >> $R/b_${v}.log
  t "$v"
}
FULL="--batch 1 --ctx 1k,32k,128k --kv fp16,int4,int2 --steps 32"
for i in 1 2 3; do
  run base_$i bitdecode-base "$FULL" X=0
  run v28b_$i bitdecode "$FULL" X=0
  run v28c_$i bitdecode-kvtf "$FULL" X=0
  run v28bnoplain_$i bitdecode "$FULL" BITDECODE_GEMV_EARLY=rope
  snap
done
MB="--batch max --ctx 32k --kv fp16,int4,int2 --steps 8"
run mbbase_1 bitdecode-base "$MB" X=0
run mbv28b_1 bitdecode "$MB" X=0
snap
nc() { # name binary timeout args env...
  local v=$1 bin=$2 to=$3 a=$4; shift 4
  env "$@" timeout $to ncu --graph-profiling node --cache-control none --clock-control none --launch-count 4000 \
    --metrics gpu__time_duration.sum --csv ./$bin bench model $a --batch 1 --steps 2 --no-linears > $R/ncu_$v.csv 2> $R/ncu_$v.err
  echo "rc=$?" >> $R/ncu_$v.err; python3 ncu_step.py $R/ncu_$v.csv > $R/ncu_$v.step.txt 2>&1; gzip $R/ncu_$v.csv
  t ncu_$v; snap
}
[ $(el) -lt 300 ] && nc base_int4 bitdecode-base 70 "--ctx 32k --kv int4" X=0
[ $(el) -lt 380 ] && nc base_int2 bitdecode-base 70 "--ctx 32k --kv int2" X=0
t end; snap
grep -h "read ceiling" $R/b_base_1.log | head -1
for f in $R/b_*.log; do echo "$(basename $f .log): $(grep -h 'ms/step' $f | sed 's/.*ctx *//;s/ B [0-9]* TP 1//;s/ (.*tok\/s)//;s/floor.*(/(/' | tr '\n' ' ')"; done
for f in $R/b_*.log; do echo "$(basename $f): $(grep -h "CUDA graphs" $f | sed 's/.*rank 0: //;s/(rank.*//' | sort | uniq -c | tr -s ' ' | tr '\n' ';')"; done | sort | uniq -c -f1 | head -5
grep -h "^--- FAIL\|^--- PASS\|^--- SKIP\|^FAIL\|^ok\|rc=\|panic" $R/kernels.log $R/backend.log $R/gpukv.log | head -60
grep -h "rc=" $R/warm_*.log $R/ncu_*.err
cat $R/times.txt
