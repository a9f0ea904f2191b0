#!/bin/bash
# run.sh (session 15, issue #19 item 1): decode_mma v2.15 (the one-split epilogue) against main.
# Run from the repo root with .gpu-epi carried: bash .gpu-epi/run.sh. TEND (s, default 190): by
# when the last timed step must have ended; a step starts only if one as long as the last of its
# kind still fits, else it is listed in skipped.txt. TT (default 100): by when the tests must end.
# SKIP1=1 skips step 1 (a second call on a warm machine); ALTS (default "1 2") the alternations.
# 1. Untimed, in parallel: the tests (this branch's test binaries) and the kernel compiles of both
#    binaries (bench attn per format on two small rows, bench model at 1K), every bench process
#    with BITDECODE_PTXAS_VERBOSE=1 (its ptxas lines; the flag is part of the CUBIN cache key, so
#    the timed runs below, with it too, find their kernels compiled). Tests still running at TT
#    are stopped, so that nothing else uses the GPU while the timed runs run.
# 2. Timed, one process at a time: main and new alternated twice, bench attn (4 formats, 5 rows)
#    and bench model (max batch at 32K), interleaved ab1, mx1, ab2, mx2.
set -o pipefail
TEND=${TEND:-190}; TT=${TT:-100}; ALTS=${ALTS:-1 2}
cd .gpu-epi; G=$PWD; R=$OUT/r; mkdir -p $R; cp run.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode_* *.test; cp commits.txt $R/
export BITDECODE_GOCODER_DIR=$G/gocoder-23m
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { echo "t=$SECONDS $*" >> $R/times.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $R/gpu.txt 2>&1; t start
# 1. Tests and compiles.
if [ -z "$SKIP1" ]; then
tst() { (timeout $((TT - SECONDS)) ./$2 -test.v -test.run "$3" > $R/$1.log 2>&1; echo "rc=$? t=$SECONDS" >> $R/$1.log) & }
tst t_ref_mma kernels.test '^TestGPUDecodeMatchesReference$/^mma$'
tst t_ref_wgmma kernels.test '^TestGPUDecodeMatchesReference$/^wgmma$'
tst t_long_ring kernels.test '^(TestGPUDecodeLong|TestGPUDecodeRingMatchesPipeline)$'
tst t_onesplit kernels.test '^TestGPUDecodeOneSplitMatchesCombine$'
tst t_ulps kernels.test '^TestGPUDecodeScaledValuesULPs$'
tst t_gpukv gpukv.test '^TestGPUCacheGolden$'
for b in main new; do
  for f in int2 k4v2 int4 int4:kt128; do
    n=w_${b}_${f/:/_}
    (BITDECODE_PTXAS_VERBOSE=1 timeout 90 ./bitdecode_$b bench attn --device cuda --kv $f --grid 1x8192,1x16384 > $R/$n.md 2> $R/$n.log; echo "rc=$? t=$SECONDS" >> $R/$n.log) &
  done
  (BITDECODE_PTXAS_VERBOSE=1 timeout 90 ./bitdecode_$b bench model --ctx 1k --kv fp16,int4,int2 --batch 1 --steps 1 --no-linears > $R/wm_$b.log 2>&1; echo "rc=$? t=$SECONDS" >> $R/wm_$b.log) &
done
wait; t phase1; snap
grep -h -- '^--- FAIL\|^ok\|^FAIL\|^PASS\|rc=' $R/t_*.log | tail -20
fi
# 2. Timed runs.
A="bench attn --device cuda --kv int2,k4v2,int4,int4:kt128 --grid 1x8192,1x131072,16x32768,32x8192,128x8192"
M="bench model --ctx 32k --kv fp16,int4,int2 --batch max --steps 16 --no-linears"
declare -A last=([ab]=30 [mx]=25)
step() { # kind name binary args...
  local k=$1 n=$2 b=$3; shift 3
  if [ $((SECONDS + last[$k])) -ge $TEND ]; then echo "skip $n t=$SECONDS" >> $R/skipped.txt; return; fi
  local s=$SECONDS
  BITDECODE_PTXAS_VERBOSE=1 timeout $((TEND + 10 - SECONDS)) ./bitdecode_$b "$@" --json $R/$n.json > $R/$n.md 2> $R/$n.log; echo "rc=$? t=$SECONDS" >> $R/$n.log
  last[$k]=$((SECONDS - s)); t $n; snap
}
for i in $ALTS; do
  step ab ab_main$i main $A; step ab ab_new$i new $A
  step mx mx_main$i main $M; step mx mx_new$i new $M
done
t end
cat $R/skipped.txt 2>/dev/null
grep -H "^| fp16 " $R/mx_*.md 2>/dev/null | cut -c1-200
snap
