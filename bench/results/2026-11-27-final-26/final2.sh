#!/bin/bash
# session 26 lead: what final.sh's time limit left, one binary at a time: the planes kernels (planes.cu passes a
# null out32), decode's window and look-ahead tests, and the rest of the gpukv suite.
D=$(cd "$(dirname "$0")" && pwd); B=/tmp/bin; mkdir -p $B; tar xJf $D/bins.tar.xz -C $B; chmod +x $B/*
R=/tmp/rf2; rm -rf $R; mkdir -p $R; cp $0 $R/
T0=$(date +%s); END=$((T0 + 540))
tl() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/timeline.txt; }
lim() { local left=$((END - $(date +%s))); [ $left -gt $1 ] && echo $1 || echo $((left > 1 ? left : 1)); }
snap() { tar czf $OUT/results.tmp -C /tmp rf2 && mv $OUT/results.tmp $OUT/results.tgz; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/gpu.txt 2>&1
export BITDECODE_CACHE_DIR=/tmp/bdc; mkdir -p /tmp/bdc
ROOT=$(pwd)
t() { local n=$1 l=$2 dir=$3; shift 3; (cd $ROOT/$dir && timeout $(lim $l) "$@" > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log); tl "$n: $(grep -c -- '--- FAIL' $R/$n.log) FAIL, $(grep -c -- '^--- PASS' $R/$n.log) PASS, $(tail -1 $R/$n.log)"; snap; }
t planes 150 gpu/kernels $B/kernels.test -test.v -test.timeout 145s -test.run '^TestGPUPlanes'
t kv 250 kvcache/gpukv $B/gpukv.test -test.v -test.timeout 245s -test.run '^(TestGPUCacheLengthBuckets|TestGPUScheduler|TestGPUKernelsSharedAcrossCaches|TestGPUPrefix|TestGPUPlane)'
t dec 140 gpu/kernels $B/kernels.test -test.v -test.timeout 135s -test.run '^(TestGPUDecodeLookAheadMatchesRefold|TestGPUDecodeWindowMatchesReference)$'
tl end; snap
