#!/bin/bash
# Lead's second call, 2026-11-25: retier_v2 as the GPU cache's re-tier (tests, memcheck), the
# bookkeeping rows with v2 and 32 layers per launch, and the 512-token minimum split A/B.
set -o pipefail
cd .gpu; G=$PWD; R=$OUT/r; mkdir -p $R
python3 -c "import lzma,tarfile; tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')"
chmod +x bitdecode gpukv.test
export BITDECODE_GOCODER_DIR=$G/gocoder-23m
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version --format=csv >> $R/times.txt
(timeout 100 ./gpukv.test -test.v -test.timeout 95s -test.run '^(TestGPUPlaneRetierMatchesPolicy|TestGPUPlaneScheduler|TestGPUPlaneCacheGolden|TestGPUPlaneCacheMatchesReference)$' > $R/gpukv.log 2>&1; echo "rc=$?" >> $R/gpukv.log) &
(timeout 100 compute-sanitizer --tool memcheck ./gpukv.test -test.short -test.v -test.run '^TestGPUPlaneRetierMatchesPolicy$' > $R/memcheck.log 2>&1; echo "rc=$?" >> $R/memcheck.log) &
wait; date -u >> $R/times.txt; snap
timeout 60 ./bitdecode bench attn --device cuda --kv bw:h20:m40:l40,bw:m100:w0:s0 --grid 1x8192,1x131072,16x32768,128x8192 --json $R/bw.json > $R/bw.md 2> $R/bw.log; echo "rc=$?" >> $R/bw.log
date -u >> $R/times.txt; snap
G2="1x4096,1x8192,1x16384,2x8192,4x8192,1x32768"
for m in default 512 default 512; do
  if [ $m = default ]; then unset BITDECODE_DECODE_MINSPLIT; else export BITDECODE_DECODE_MINSPLIT=$m; fi
  timeout 40 ./bitdecode bench attn --device cuda --kernel auto --kv int4,int4:kt128,int2,k4v2 --grid $G2 >> $R/minsplit_$m.md 2>> $R/minsplit_$m.log; echo "rc=$?" >> $R/minsplit_$m.log
done
unset BITDECODE_DECODE_MINSPLIT
date -u >> $R/times.txt; snap
