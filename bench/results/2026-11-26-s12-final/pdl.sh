#!/bin/bash
# Lead's second call, session 12: the merged tree's max-batch steps ran slower than the base's in
# final.sh (int4 31.88 against 31.54 ms, int2 39.37 against 38.63, one run each). The only
# change on that path is the decode kernels' programmatic dependent launch (decode-attention.md
# session 17), so: the new binary with BITDECODE_DECODE_PDL=auto (the default), off and wait,
# and the base, alternated three times at max batch (int4, int2) and at B = 1 (32K).
# Run from the repo root with .gpu/ carried (bundle.tar.xz as final.sh's).
set -o pipefail
cd .gpu; G=$PWD; R=$OUT/r; mkdir -p $R; cp pdl.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode bitdecode-base
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $R/times.txt
(timeout 120 ./bitdecode-base bench model --ctx 1k --kv int4,int2 --steps 4 --no-linears > $R/warm_base.log 2>&1) &
(timeout 120 ./bitdecode bench model --ctx 1k --kv int4,int2 --steps 4 --no-linears > $R/warm_new.log 2>&1) &
wait; t warm
run() { # name seconds pdl binary args...
  local n=$1 s=$2 p=$3 b=$4; shift 4
  BITDECODE_DECODE_PDL=$p timeout $s ./$b "$@" --json $R/$n.json > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log; t $n; snap
}
for i in 1 2 3; do
  for m in auto off wait; do run max_$m$i 60 $m bitdecode bench model --ctx 32k --kv int4,int2 --batch max --steps 16 --no-linears; done
  run max_base$i 60 auto bitdecode-base bench model --ctx 32k --kv int4,int2 --batch max --steps 16 --no-linears
done
for i in 1 2; do
  for m in auto off; do run b1_$m$i 60 $m bitdecode bench model --ctx 32k --kv int4,int2 --steps 32 --no-linears; done
done
t end; snap; rm -rf $R
