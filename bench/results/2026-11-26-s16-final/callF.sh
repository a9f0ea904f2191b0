#!/bin/bash
# Session 16, lead call F: the tests the k/v routing change (1bb801a) touches, on the final tree.
set -o pipefail
cd .gpu; R=$OUT/r; mkdir -p $R
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x *.test
export BITDECODE_CACHE_DIR=$PWD/cache
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/times.txt
tst() { local to=$1; shift; (timeout $to ./$2 -test.v -test.timeout ${to}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) & }
tst 240 backend1 backend.test '^(TestQuantLinearTiled)$'
tst 200 backend2 backend.test '^(TestJoinTiled|TestJoinTiledSwiGLU|TestJoinTiledKnobs|TestGEMMQRoutes|TestQuantLinear|TestLinearGraphReplay)$'
wait
for f in $R/*.log; do echo "== $(basename $f): $(grep -c -- '--- FAIL' $f) FAIL, $(grep -c -- '--- PASS' $f) PASS, $(tail -1 $f)"; done
grep -h -A5 -- "--- FAIL" $R/*.log | head -30
