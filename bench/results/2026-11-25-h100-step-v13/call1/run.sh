#!/bin/bash
# v13 (s9-lin, 2026-11-25): linear.cu v5, the narrow kernel's weights through a shared-memory ring.
# One call on nvidia-h100-x1, run from the repo root with .gpu-lin/ carried (bundle.tar.xz:
# main-bitdecode = main HEAD, bitdecode = s9-lin (3 stages), bitdecode-s4 / -s6 = the same code
# with linearStages 4 / 6, the test binaries from s9-lin).
set -o pipefail
T0=$(date +%s)
cd .gpu-lin; G=$PWD; R=$OUT/r; mkdir -p $R; cp run.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x main-bitdecode bitdecode bitdecode-s* *.test
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
el() { echo "$* $(( $(date +%s) - T0 )) s" >> $R/times.txt; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; } > $R/times.txt 2>&1; el extracted
T=80
tst() { # name binary regexp
  (timeout $T ./$2 -test.v -test.timeout ${T}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) &
}
tst kernels kernels.test '^(TestLinear.*|TestGridDependentKernelsWait|TestProgramsShareTheHeader|TestHeaderConstantsMatchGo)$'
tst backend backend.test '^(TestLinear|TestLinearDeterministic|TestLinearGroup|TestLinearGraphReplay|TestBatchInvariantLinear)$'
tst gpukv gpukv.test '^(TestGPUGraphReplaySameBits|TestGPUBatchInvariant.*|TestGPUCacheBatchInvariant)$'
wait; el tests; snap
bin() { case $1 in main) echo ./main-bitdecode;; new) echo ./bitdecode;; *) echo ./bitdecode-$1;; esac; }
model() { # name kvs round
  timeout 40 $(bin $1) bench model --ctx 32k --kv $2 --batch max --steps 32 --no-linears --json $R/model_$1_$3.json > $R/model_$1_$3.log 2>&1; echo "rc=$?" >> $R/model_$1_$3.log
  el model $1 $3; snap
}
gemv() { # name rows
  timeout 60 $(bin $1) bench gemv --rows $2 > $R/gemv_$1.log 2>&1; echo "rc=$?" >> $R/gemv_$1.log
  el gemv $1; snap
}
model main fp16,int4,int2 1; model new fp16,int4,int2 1; model s4 fp16 1; model s6 fp16 1
gemv main 15,55,100; gemv new 15,55,100; gemv s4 15; gemv s6 15
model s6 fp16 2; model s4 fp16 2; model new fp16,int4,int2 2; model main fp16,int4,int2 2
grep -h "^--- FAIL\|^FAIL\|^ok\|^PASS\|rc=\|panic\|registers" $R/kernels.log $R/backend.log $R/gpukv.log
grep -h "T=15 \|rc=" $R/gemv_*.log
grep -h "ms/step\|rc=" $R/model_*.log | head -40
cat $R/times.txt
