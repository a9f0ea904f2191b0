#!/bin/bash
# call1.sh (s15-tiled): the GPU tests of the tiled layout as the only copy (kernels: the tiled
# v2 / LaunchTiled / dequantization against their wq twins, v6 against v5.1, the reference test
# of every width; backend: Linear tiled vs GEMVQWQ, the copies kept, the quantized model against
# the CPU), then alone on the GPU: the decode step main vs this branch alternated twice (B = 1 at
# 1K and 32K, B = 8 and B = 16 at 1K), this branch with BITDECODE_GEMVQ_WQ=1 once (B = 1), and
# BenchmarkQuantLinearLayout (Linear at T = 1, 2, 8, 16, 512 over 4 cold copies, tiled vs wq,
# alternated, twice).
# Run from the repo root with .gpu-tiled/ carried (bundle.tar.xz from build.sh call1.sh).
set -o pipefail
cd .gpu-tiled; G=$PWD; R=$OUT/r; mkdir -p $R; cp run.sh $R/call1.sh
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode bitdecode-main *.test; cp commit $R/
export BITDECODE_GOCODER_DIR=$G/gocoder-23m
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" t=$SECONDS $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $R/times.txt
tst() { # name binary regexp
  (timeout 170 ./$2 -test.v -test.timeout 170s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) &
}
tst ktiled kernels.test '^(TestGEMVQTiledMatchesWQ|TestGEMVQ6MatchesV5|TestPackTilesMatchesWQ)$'
tst kref kernels.test '^TestGEMVQMatchesReference$'
tst backend backend.test '^(TestQuantLinear.*|TestTiledOnlyCopy|TestTiledLayout.*|TestModelQuantMatchesCPU|TestLinearGraphReplay)$'
wait; t tests; snap
grep -hE "^(--- |ok|FAIL|PASS|rc=|panic)" $R/ktiled.log $R/kref.log $R/backend.log
run() { # name seconds command args...
  local n=$1 s=$2; shift 2
  timeout $s "$@" > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log; t $n; snap
}
M1="bench model --ctx 1k,32k --kv int4 --weights int4 --batch 1 --steps 32 --no-linears"
M8="bench model --ctx 1k --kv int4 --weights int4 --batch 8 --steps 32 --no-linears"
M16="bench model --ctx 1k --kv int4 --weights int4 --batch 16 --steps 32 --no-linears"
for i in 1 2; do
  run b1_main_$i 40 ./bitdecode-main $M1
  run b1_new_$i 40 ./bitdecode $M1
  run b8_main_$i 30 ./bitdecode-main $M8
  run b8_new_$i 30 ./bitdecode $M8
  run b16_main_$i 30 ./bitdecode-main $M16
  run b16_new_$i 30 ./bitdecode $M16
done
run b1_newwq 40 env BITDECODE_GEMVQ_WQ=1 ./bitdecode $M1
run layout 100 ./backend.test -test.run '^$' -test.bench QuantLinearLayout -test.benchtime 200x -test.count 2
t end; snap
grep -hE "^(int4 .*ms/step|GPU 0 with)" $R/b*_*.log | head -40 > $R/summary.txt
for f in $R/b*_*.log; do echo "$(basename $f): $(grep -hE '^int4 .*ms/step' $f | sed -E 's/.*ctx +([0-9]+) B ([0-9]+).*: ([0-9.]+) ms.*/\1 B\2 \3/' | tr '\n' ' ') $(grep -h 'GPU 0 with' $f)"; done
grep -E "^Benchmark" $R/layout.log | sed -E 's/ +[0-9]+ +[0-9]+ ns\/op//'
cat $R/times.txt
