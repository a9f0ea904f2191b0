#!/bin/bash
# s13-logits call 1 (2026-11-26): v23 (greedy tokens picked on the GPU, sample.cu's argmax_rows;
# the logits no longer downloaded whole): the GPU tests of the change and gocoder-23m's (carried
# xz-compressed), then bench model at max batch with --logits full and the default (token)
# alternated twice, and B = 1 at 32K once each. Run from the repo root with .gpu-logits carried.
set -o pipefail
T0=$(date +%s)
cd .gpu-logits; R=$OUT/r; mkdir -p $R; cp call1.sh $R/
python3 -c "
import lzma,tarfile
for f in ('bins.tar.xz','model.tar.xz'):
    tarfile.open(fileobj=lzma.open(f)).extractall('b')
"
cd b; chmod +x bitdecode *.test
export BITDECODE_GOCODER_DIR=$PWD/gocoder-23m
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
el() { echo $(( $(date +%s) - T0 )); }
t() { echo "$(date -u +%T) $(el) s $*" >> $R/times.txt; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } > $R/times.txt 2>&1; t extracted
run() { local to=$1 bin=$2 name=$3 re=$4; shift 4; timeout $to ./$bin -test.v -test.timeout ${to}s -test.run "$re" "$@" > $R/$name.log 2>&1; echo "rc=$?" >> $R/$name.log; }
run 40 kernels.test kernels '^(TestArgmaxRows|TestArgmaxRowsBadShape)$' &
run 75 gpu.test backend '^(TestArgmaxRowsBackend|TestArgmaxRowsErrors|TestForwardGreedyTokens|TestModelMatchesCPU|TestPinnedDownload|TestErrors)$' &
run 75 gpukv.test gpukv '^(TestGPUGreedyTokens|TestGPUBatchInvariantScheduler|TestGPUBatchInvariantLogits|TestGPUCacheGolden|TestGPUGraphReplaySameBits)$' -test.short &
run 75 gpukv.test gpukv_sched '^(TestGPUScheduler)$' &
wait; t tests; snap
M="bench model --ctx 32k --kv fp16,int4,int2 --no-linears"
for i in 1 2; do
  for l in full token; do
    timeout 40 ./bitdecode $M --batch max --steps 16 --logits $l --json $R/max_${l}_$i.json > $R/max_${l}_$i.log 2>&1; echo "rc=$?" >> $R/max_${l}_$i.log
    t "max $l $i"; snap
  done
done
for l in full token; do
  timeout 25 ./bitdecode $M --batch 1 --steps 32 --logits $l --json $R/b1_$l.json > $R/b1_$l.log 2>&1; echo "rc=$?" >> $R/b1_$l.log
  t "b1 $l"; snap
done
t end; snap
grep -h "^--- FAIL\|^FAIL\|^ok\|^PASS\|^--- SKIP\|rc=\|panic" $R/*.log | sort | uniq -c
grep -l "FAIL\|panic" $R/*.log
for f in $R/max_*.log $R/b1_*.log; do echo "== $f"; grep -h "Decode step\|^| fp16\|rc=" $f; done
cat $R/times.txt
