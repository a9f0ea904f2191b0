#!/bin/bash
# run2.sh (session 15: v4 only, after run.sh showed no spill-free candidate; session 14, issue #19 item 1): CUDA 13's ptxas report and int2 time of main's binary and
# each candidate of the int2 tile loop, then the tests of the candidate built into the test
# binaries (build.sh's LAND), then main against the best spill-free candidate, alternated twice.
# Run from the repo root with .gpu-spill carried: bash .gpu-spill/run.sh; TEND (s, default 185)
# is when the last step must have ended; a step starts only if one as long as the last fits.
set -o pipefail
TEND=${TEND:-185}
cd .gpu-spill; G=$PWD; R=$OUT/r; mkdir -p $R; cp run.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode_* *.test
export BITDECODE_GOCODER_DIR=$G/gocoder-23m
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { echo "t=$SECONDS $*" >> $R/times.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $R/gpu.txt 2>&1; t start
last=0
fits() { [ $((SECONDS + last)) -lt $TEND ] || { echo "skip $1 t=$SECONDS" >> $R/skipped.txt; return 1; }; }
step() { # name binary args...: one timed run, its table, log and JSON
  local n=$1 b=$2; shift 2; fits $n || return 0
  local s=$SECONDS
  timeout $((TEND + 10 - SECONDS)) ./bitdecode_$b "$@" --json $R/$n.json > $R/$n.md 2> $R/$n.log; echo "rc=$? t=$SECONDS" >> $R/$n.log
  last=$((SECONDS - s)); snap
}
BEST=v4
BITDECODE_PTXAS_VERBOSE=1 step p1_v4 v4 bench attn --device cuda --kv int2,k4v2,int4 --grid 1x8192
# 2. Tests of the candidate in the test binaries, in parallel with each other.
if [ $((SECONDS + 100)) -lt $TEND ]; then
  T=$((TEND - SECONDS - 5))
  tst() { (timeout $T ./$2 -test.v -test.timeout ${T}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) & }
  tst t_ref kernels.test '^TestGPUDecodeMatchesReference$/^mma$'
  tst t_long kernels.test '^(TestGPUDecodeLong|TestGPUDecodeRingMatchesPipeline)$'
  tst t_backend backend.test '^(TestModelMatchesCPU|TestModelPDLSameBits)$'
  tst t_gpukv gpukv.test '^(TestGPUCacheGolden|TestGPUGraphReplaySameBits|TestGPUBatchInvariantLogits)$'
  wait; t tests; snap
else echo "skip tests t=$SECONDS" >> $R/skipped.txt; fi
# 3. main against the best spill-free candidate, alternated twice.
A="bench attn --device cuda --kv int2,k4v2,int4 --grid 1x131072,16x32768,32x8192,128x8192"
M="bench model --ctx 32k --kv fp16,int4,int2 --batch max --steps 16 --no-linears"
last=0
for i in 1 2; do
  step ab_main$i main $A; step ab_$BEST$i $BEST $A
  step mx_main$i main $M; step mx_$BEST$i $BEST $M
done
t end
grep -h -- '^--- FAIL\|^ok\|^FAIL\|^PASS\|rc=' $R/t_*.log 2>/dev/null | tail -12
grep -h "ms/step\| int2 \| fp16 " $R/mx_*.md 2>/dev/null | head
snap
