#!/bin/bash
# Lead's third call, session 12: the decode kernels' programmatic launch only for a split grid of
# one wave (DecodePlan.dependentLaunch), after pdl.sh found early launches slow at max batch.
# bitdecode (the rule), bitdecode-prev (the merged tree before it: PDLAuto for every grid) and
# bitdecode-base (5a0fc94) alternated three times at max batch (int4, int2) and at B = 1 (32K,
# 128K), after decode_mma's reference tests with the rule.
# Run from the repo root with .gpu-lead/ carried (bins.tar.xz).
set -o pipefail
cd .gpu-lead; G=$PWD; R=$OUT/r; mkdir -p $R; cp wave.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bins.tar.xz')).extractall('.')
"
chmod +x bitdecode bitdecode-prev bitdecode-base kernels.test
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $R/times.txt
(timeout 150 ./kernels.test -test.v -test.timeout 150s -test.run '^TestGPUDecodeMatchesReference$/^mma$' > $R/mma.log 2>&1; echo "rc=$?" >> $R/mma.log) &
(timeout 150 ./kernels.test -test.v -test.timeout 150s -test.run '^(TestGPUDecodeLong|TestGPUDecodeOneSplitMatchesCombine|TestDecodeDependentLaunch)$' > $R/kernels.log 2>&1; echo "rc=$?" >> $R/kernels.log) &
for b in bitdecode bitdecode-prev bitdecode-base; do
  (timeout 120 ./$b bench model --ctx 1k --kv int4,int2 --steps 4 --no-linears > $R/warm_$b.log 2>&1) &
done
wait; t tests; snap
run() { # name seconds binary args...
  local n=$1 s=$2 b=$3; shift 3
  timeout $s ./$b "$@" --json $R/$n.json > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log; t $n; snap
}
for i in 1 2 3; do
  run max_wave$i 60 bitdecode bench model --ctx 32k --kv int4,int2 --batch max --steps 16 --no-linears
  run max_prev$i 60 bitdecode-prev bench model --ctx 32k --kv int4,int2 --batch max --steps 16 --no-linears
  run max_base$i 60 bitdecode-base bench model --ctx 32k --kv int4,int2 --batch max --steps 16 --no-linears
done
for i in 1 2; do
  run b1_wave$i 60 bitdecode bench model --ctx 32k,128k --kv int4,int2 --steps 32 --no-linears
  run b1_prev$i 60 bitdecode-prev bench model --ctx 32k,128k --kv int4,int2 --steps 32 --no-linears
done
t end; snap; rm -rf $R
