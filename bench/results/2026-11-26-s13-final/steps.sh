#!/bin/bash
# Session 13's final call 2: the B = 1 step and max batch at 32K, session 12's final binary
# (bitdecode-base, 97c35bf) against the merged tree, alternated.
# Run from the repo root with .gpu/ carried (bundle.tar.xz: build.sh's, without the model).
set -o pipefail
cd .gpu; G=$PWD; R=$OUT/r; mkdir -p $R; cp steps.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode bitdecode-base
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $R/times.txt
run() { # name seconds binary args...
  local n=$1 s=$2 b=$3; shift 3
  timeout $s ./$b "$@" --json $R/$n.json > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log; t $n; snap
}
B1="bench model --ctx 1k,32k,128k --kv fp16,int4,int2 --steps 32 --no-linears"
MX="bench model --ctx 32k --kv fp16,int4,int2 --batch max --steps 16 --no-linears"
run b1_base1 50 bitdecode-base $B1
run b1_new1 50 bitdecode $B1
for i in 1 2; do
  run max_base$i 50 bitdecode-base $MX
  run max_new$i 50 bitdecode $MX
done
t end; snap; rm -rf $R
