#!/bin/bash
# Call 4 (session 15, after s15-int3 merged): int3 weights over the tiled layout at 2-16 rows of x and
# in prefill (s15-int3 timed only one row), against wq's layout (BITDECODE_GEMVQ_WQ=1 / Options.GEMVQWQ:
# v3.2 at one row of int3, v2 and the dequantization over wq's layout), and the packed-weight step table
# on the merged tree. Run from the repo root with .gpu/ carried (bundle.tar.xz: bitdecode, gpu.test).
set -o pipefail
cd .gpu; G=$PWD; R=$OUT/r; mkdir -p $R; cp int3.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode gpu.test
export BITDECODE_CACHE_DIR=$G/cache
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $R/times.txt
run() { # name seconds args...
  local n=$1 s=$2; shift 2
  timeout $s "$@" > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log; t $n; snap
}
B8="bench model --ctx 1k --kv int4 --weights int3,int4 --batch 8 --steps 32 --no-linears"
W="bench model --ctx 1k,32k --kv int4 --weights int4,int3,int8 --batch 1 --steps 32 --no-linears"
run w 120 ./bitdecode $W --json $R/w.json
for i in 1 2; do
  run b8_tiled_$i 60 ./bitdecode $B8
  run b8_wq_$i 60 env BITDECODE_GEMVQ_WQ=1 ./bitdecode $B8
done
run layout 200 ./gpu.test -test.run '^$' -test.bench QuantLinearLayout -test.benchtime 100x -test.count 2
t end; snap; rm -rf $R
