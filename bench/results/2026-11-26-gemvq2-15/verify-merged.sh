#!/bin/bash
# verify-merged.sh (s15-gemvq2 after merging main's session 15c): NOT RUN in session 15b (no
# device call left). The checks the merged tree needs on an H100: v5.2/v6.1's tests and the
# tiled-only route's, then the B = 1 int4 step with v6.1 (default) against v6
# (BITDECODE_GEMVQ_V51=1, main's kernel before the merge), alternated twice. The same binary for
# both sides, so no base build is needed: from the repo root,
#   bash bench/results/2026-11-26-gemvq2-15/build.sh verify-merged.sh
# (build.sh also bundles a bitdecode-main from /tmp/g2/bins/bitdecode-base: drop that line or
# build one) and `run` with carry [".gpu-gemvq2"] and command `bash .gpu-gemvq2/run.sh`.
set -o pipefail
cd .gpu-gemvq2; R=$OUT/r; mkdir -p $R; cp run.sh $R/verify-merged.sh
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode *.test; cp commit $R/
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" t=$SECONDS $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $R/times.txt
tst() { # name binary regexp
  (timeout 170 ./$2 -test.v -test.timeout 165s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) &
}
tst k52 kernels.test '^(TestGEMVQ52MatchesV51|TestGEMVQ6MatchesV5|TestPackTilesMatchesWQ|TestGEMVQTiledMatchesWQ)$'
tst kref kernels.test '^TestGEMVQMatchesReference$'
tst backend backend.test '^(TestQuantLinear|TestQuantLinearTiled|TestTiledLayoutRouting|TestTiledLayoutBytes|TestTiledOnlyCopy)$'
wait; t tests; snap
grep -hE "^(--- |ok|FAIL|PASS|rc=)" $R/k52.log $R/kref.log $R/backend.log
run() { # name seconds command args...
  local n=$1 s=$2; shift 2
  timeout $s "$@" > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log; t $n; snap
}
M="bench model --ctx 1k,32k --kv int4 --weights int4 --batch 1 --steps 32 --no-linears"
for i in 1 2; do
  run model_v6_$i 60 env BITDECODE_GEMVQ_V51=1 ./bitdecode $M
  run model_v61_$i 60 ./bitdecode $M
done
t end; snap
for f in $R/model_*.log; do echo "$f: $(grep -h 'ms/step' $f | sed 's/.*TP 1: //; s/ (.*//' | tr '\n' ' ')"; done
cat $R/times.txt
