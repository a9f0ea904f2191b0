#!/bin/bash
# Session 21-int2 call 2: main's binary against the final build (bitdecode-fin: v2.20 without the L2
# prefetch), bench model alternated twice, then the final build's attention grid, under a time guard.
set -o pipefail
D=$PWD/.gpu-int2
LIMIT=${LIMIT:-46}
t0=$(date +%s)
el() { echo $(( $(date +%s)-t0 )); }
python3 -c "import lzma,tarfile; tarfile.open(fileobj=lzma.open('$D/bins.tar.xz')).extractall('$D/bin')" && chmod +x $D/bin/*
echo "unpacked $(el)s" >> $OUT/times.txt
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt 2>&1
run() { # name binary args...
  local n=$1 b=$2; shift 2
  local left=$(( LIMIT - $(el) )); [ $left -lt 4 ] && { echo "$n skipped at $(el)s" >> $OUT/times.txt; return; }
  timeout $left $D/bin/$b "$@" > $OUT/$n.md 2>&1; echo "$n rc=$? end $(el)s" >> $OUT/times.txt
}
A="bench attn --device cuda --kv int2,k4v2 --grid 100x32768,55x32768,128x8192,1x131072"
M="bench model --ctx 32k --kv fp16,int2 --batch max --steps 16 --no-linears"
run model_main2 bitdecode-main $M
run model_fin1 bitdecode-fin $M
run model_main3 bitdecode-main $M
run model_fin2 bitdecode-fin $M
run attn_fin1 bitdecode-fin $A
cd $OUT && tar czf results.tgz *.md times.txt gpu.txt 2>/dev/null; rm -f *.md
