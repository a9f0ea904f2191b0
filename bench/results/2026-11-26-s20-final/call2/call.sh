#!/bin/bash
# Session 20, the lead's last call: kvcache/gpukv's GPU tests on the final tree (after the length-bucket
# plans and the moe.cu epilogue helper), three processes in parallel; the gocoder-23m tests skip (the
# checkpoint does not travel).
set -o pipefail
cd .gpu; G=$PWD; R=$OUT/r; mkdir -p $R
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('a.tar.xz')).extractall('.')
"
chmod +x *.test
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >> $R/times.txt
export BITDECODE_CACHE_DIR=$G/cache
mkdir -p $G/kvcache/gpukv
tst() { local to=$1; shift; (cd $G/$4 && timeout $to $G/$2 -test.v -test.timeout ${to}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) & }
tst 210 p1 gpukv.test '^(TestGPUTransformers|TestGPUSyntheticFamilies|TestGPUGreedyTokens)$' kvcache/gpukv
tst 210 p2 gpukv.test '^(TestGPUCacheMatchesReference|TestGPUPerLayerFormats|TestGPUKernelsSharedAcrossCaches|TestGPUPrefixSharing|TestGPUPrefixEviction|TestGPURoPEAppendSameBits|TestGPUBatchInvariantScheduler)$' kvcache/gpukv
tst 210 p3 gpukv.test '^(TestGPUMoEGraphReplaySameBits|TestGPUMoEQuantizedExperts|TestGPUMoEGroupedPrefill|TestGPUPlaneScheduler|TestGPUModelDECLists|TestGPUGraphReplaySameBits)$' kvcache/gpukv
wait; date -u >> $R/times.txt; snap
for f in $R/*.log; do echo "== $(basename $f): $(grep -c -- '--- FAIL' $f) FAIL, $(grep -c -- '--- PASS' $f) PASS, $(grep -c -- '--- SKIP' $f) SKIP, $(tail -1 $f)"; done
grep -h -- "--- FAIL" $R/*.log | head
cat $R/times.txt
