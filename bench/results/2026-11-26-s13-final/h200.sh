#!/bin/bash
# Session 13's third call, on an H200 (issue #19 item 4): the merged tree's step table (B = 1 at
# 1K/32K/128K and max batch at 32K) beside session 12's final binary, and its attention grid.
# Run from the repo root with .gpu/ carried (bundle.tar.xz: build.sh's, without the model).
set -o pipefail
cd .gpu; G=$PWD; R=$OUT/r; mkdir -p $R; cp h200.sh $R/
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
run b1_new 60 bitdecode $B1
run max_new 60 bitdecode $MX
run b1_base 60 bitdecode-base $B1
run max_base 60 bitdecode-base $MX
run attn_new 120 bitdecode bench attn --device cuda --kv fp16,int8,int4,int4:kt128,int2,k4v2 --grid 1x8192,1x32768,1x131072,16x32768,128x8192
t end; snap; rm -rf $R
