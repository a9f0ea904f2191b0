#!/bin/bash
# s18-b1 call 3 (2026-11-26): v28e (only f16_to_f32_hadamard(_warp) trigger before they wait) and v28f (v28e +
# decode_wgmma.cu's one-sequence fp16 plan padded to two CTAs an SM and launched as a programmatic dependent),
# against main, alternated three times at B = 1 (v28f with BITDECODE_DECODE_PDL=off too: the padding alone);
# max batch at 32K once each for main and v28f; the GPU tests.
set -o pipefail
T0=$(date +%s)
cd .gpu-b1; R=/tmp/r_b1; rm -rf $R; mkdir -p $R
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
cd b; cp ../call3.sh $R/
chmod +x bitdecode* *.test
snap() { (cd /tmp && tar czf $OUT/results.tmp r_b1 && mv $OUT/results.tmp $OUT/results.tgz); }
el() { echo $(( $(date +%s) - T0 )); }
t() { echo "$(date -u +%T) $(el) s $*" >> $R/times.txt; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } > $R/times.txt 2>&1; t extracted
T=200
tst() { local n=$1 b=$2 re=$3; shift 3; (env "$@" timeout $T ./$b -test.v -test.timeout ${T}s -test.run "$re" > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log) & }
tst kernels kernels.test '^(TestGPUDecodeMatchesReference|TestGPUDecodeLong|TestGPUDecodeOneSplitMatchesCombine|TestSessionOptions|TestWGMMAFewSmem|TestParseTuning|TestGridDependentKernelsWait|TestDecodeDependentLaunch|TestOpsHadamard|TestOpsConvert)$' X=0
tst gpukv gpukv.test '^(TestGPUGraphReplaySameBits)$' X=0
tst backend backend.test '^(TestLinearGraphReplay|TestParseOptions)$' X=0
for b in bitdecode-base bitdecode-e bitdecode; do
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
  run v28e_$i bitdecode-e "$FULL" X=0
  run v28f_$i bitdecode "$FULL" X=0
  run v28fpdloff_$i bitdecode "$FULL" BITDECODE_DECODE_PDL=off
  snap
done
MB="--batch max --ctx 32k --kv fp16,int4,int2 --steps 8"
run mbbase_1 bitdecode-base "$MB" X=0
run mbv28f_1 bitdecode "$MB" X=0
t end; snap
grep -h "read ceiling" $R/b_base_1.log | head -1
for f in $R/b_*.log; do echo "$(basename $f .log): $(grep -h 'ms/step' $f | sed 's/.*ctx *//;s/ B [0-9]* TP 1//;s/ (.*tok\/s)//;s/floor.*(/(/' | tr '\n' ' ')"; done
grep -h "^--- FAIL\|^--- PASS\|^--- SKIP\|^FAIL\|^ok\|rc=\|panic" $R/kernels.log $R/backend.log $R/gpukv.log | head -60
grep -h "rc=" $R/warm_*.log
cat $R/times.txt
