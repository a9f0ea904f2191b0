#!/bin/bash
# Session 18, lead call B on the merged tree: backend/gpu's tests on the reference checkpoint
# (gocoder-23m travels in .gpu-b/b.tar.xz): golden tokens and logits against the CPU, PDL's same bits
# (the padded one-sequence fp16 plan v28f is a programmatic dependent), the MoE kernel.
set -o pipefail
cd .gpu-b; G=$PWD; R=$OUT/r; mkdir -p $R
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('b.tar.xz')).extractall('.')
"
chmod +x *.test
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >> $R/times.txt
export BITDECODE_CACHE_DIR=$G/cache BITDECODE_GOCODER_DIR=$G/shared/models/gocoder-23m
mkdir -p $G/backend/gpu
tst() { local to=$1; shift; (cd $G/$4 && timeout $to $G/$2 -test.v -test.timeout ${to}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) & }
tst 280 backend1 backend.test '^(TestModelMatchesCPU)$' backend/gpu
tst 280 backend2 backend.test '^(TestModelPDLSameBits|TestForwardGreedyTokens)$' backend/gpu
tst 280 backend3 backend.test '^(TestMixExperts|TestLinearGraphReplay|TestFoldSwiGLU|TestFoldRoPE)$' backend/gpu
wait; t tests; snap
for f in $R/*.log; do echo "== $(basename $f): $(grep -c -- '--- FAIL' $f) FAIL, $(grep -c -- '--- PASS' $f) PASS, $(tail -1 $f)"; done
cat $R/times.txt
