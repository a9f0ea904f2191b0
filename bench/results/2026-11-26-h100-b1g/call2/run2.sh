#!/bin/bash
# s11-b1g's call 2 (2026-11-26): gemv.cu v7 (default: v6's batch schedule, the RoPE pair's cos/sin
# under the loads; rings by BITDECODE_GEMV_DEPTH) against main (e2abd39): the GEMV and backend tests
# (gocoder-23m where it travelled), bench gemv --variants (new), bench gemv --rows 1 (main, new),
# bench model B = 1 at 32K (main; new; new + early weights; new ring 4; new ring 4 + early; twice),
# then at 128K (main, new, new + early; twice) with the time left.
set -o pipefail
T0=$(date +%s)
cd .gpu-b1g; R=$OUT/r; mkdir -p $R; cp run2.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
cd b
chmod +x bitdecode* *.test
[ -d gocoder-23m ] && export BITDECODE_GOCODER_DIR=$PWD/gocoder-23m
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
el() { echo $(( $(date +%s) - T0 )); }
t() { echo "$(date -u +%T) $(el) s $*" >> $R/times.txt; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } > $R/times.txt 2>&1; t extracted
T=45
tst() { (timeout $T ./$2 -test.v -test.timeout ${T}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) & }
tst kernels kernels.test '^(TestGEMVMatchesReference|TestGEMVDependentLaunch|TestGEMVGroups|TestGEMVDepths|TestGEMVSwiGLU|TestGEMVRoPE|TestGridDependentKernelsWait|TestOpsRoPEQK)$'
tst backend backend.test '^(TestModelMatchesCPU|TestModelPDLSameBits|TestLinearGraphReplay|TestBatchInvariantLinear|TestLinearGroup|TestFoldSwiGLU|TestFoldRoPE|TestFoldSwiGLUJoined|TestParseOptions|TestOpenRejectsBadOptions)$'
wait; t tests; snap
timeout 20 ./bitdecode bench gemv --rows 1 --variants --json $R/variants.json > $R/variants.log 2>&1; echo "rc=$?" >> $R/variants.log
t variants; snap
for b in bitdecode-main bitdecode; do
  timeout 15 ./$b bench gemv --rows 1 --json $R/gemv_$b.json > $R/gemv_$b.log 2>&1; echo "rc=$?" >> $R/gemv_$b.log
  t "gemv $b"; snap
done
run() { # name ctx binary env...
  local v=$1 c=$2 b=$3; shift 3
  env "$@" timeout 25 ./$b bench model --ctx $c --kv fp16,int4,int2 --batch 1 --steps 64 --no-linears --json $R/b1_${c}_${v}.json > $R/b1_${c}_${v}.log 2>&1; echo "rc=$?" >> $R/b1_${c}_${v}.log
  t "b1 $c $v"; snap
}
for i in 1 2; do
  run main_$i 32k bitdecode-main X=0
  run new_$i 32k bitdecode X=0
  run early_$i 32k bitdecode BITDECODE_PDL_EARLY=1
  run ring4_$i 32k bitdecode BITDECODE_GEMV_DEPTH=4
  run ring4early_$i 32k bitdecode BITDECODE_GEMV_DEPTH=4 BITDECODE_PDL_EARLY=1
done
for i in 1 2; do
  [ $(el) -gt 120 ] && break
  run main_$i 128k bitdecode-main X=0
  run new_$i 128k bitdecode X=0
  run early_$i 128k bitdecode BITDECODE_PDL_EARLY=1
done
t end; snap
grep -H "ms/step\|rc=" $R/b1_*.log | sed 's|.*/b1_||' | head -80
grep -h "^--- FAIL\|^--- PASS\|^FAIL\|^ok\|rc=\|panic" $R/kernels.log $R/backend.log
grep -h "rc=\|ceiling\|T=1" $R/variants.log | head -70
grep -h "gemv.cu" $R/gemv_*.log
cat $R/times.txt
