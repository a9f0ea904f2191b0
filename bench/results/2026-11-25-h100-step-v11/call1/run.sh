#!/bin/bash
# s8-step (v11, the one call): linear.cu v5 tests, then bench gemv at 8 and 15 rows and bench model
# --batch max --ctx 32k fp16 for main (713b70e) and the three variant binaries (MT cap 1, 2, 4),
# alternated twice. Run from the repo root with .gpu-step/ carried (bundle.tar.xz).
set -o pipefail
T0=$(date +%s)
cd .gpu-step; G=$PWD; R=$OUT/r; mkdir -p $R; cp run.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x main-bitdecode bitdecode-* *.test
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
el() { echo "$* $(( $(date +%s) - T0 )) s" >> $R/times.txt; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; } > $R/times.txt 2>&1; el extracted
T=70
tst() { # name binary regexp
  (timeout $T ./$2 -test.v -test.timeout ${T}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) &
}
tst kernels kernels.test '^(TestLinear.*|TestGridDependentKernelsWait|TestProgramsShareTheHeader|TestHeaderConstantsMatchGo)$'
tst backend backend.test '^(TestLinearGroup|TestBatchInvariantLinear|TestModelMatchesCPU|TestModelPDLSameBits)$'
tst gpukv gpukv.test '^(TestGPUGraphReplaySameBits|TestGPUBatchInvariant.*|TestGPUCacheBatchInvariant)$'
wait; el tests; snap
model() { # round
  for b in main mt2 mt1 mt4; do
    B=./bitdecode-$b; [ $b = main ] && B=./main-bitdecode
    timeout 30 $B bench model --ctx 32k --kv fp16 --batch max --steps 32 --no-linears --json $R/model_${b}_$1.json > $R/model_${b}_$1.log 2>&1; echo "rc=$?" >> $R/model_${b}_$1.log
    el model $b $1; snap
  done
}
model 1
for b in main mt2 mt1 mt4; do
  B=./bitdecode-$b; [ $b = main ] && B=./main-bitdecode
  timeout 40 $B bench gemv --rows 8,15 > $R/gemv_$b.log 2>&1; echo "rc=$?" >> $R/gemv_$b.log
  el gemv $b
done
snap
model 2
grep -h "^--- FAIL\|^FAIL\|^ok\|^PASS\|rc=\|panic\|registers" $R/kernels.log $R/backend.log $R/gpukv.log
grep -h "T=15\|rc=" $R/gemv_*.log
grep -h "ms/step\|rc=" $R/model_*_?.log
cat $R/times.txt
