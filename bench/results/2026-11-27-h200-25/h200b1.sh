#!/bin/bash
# session 25 lead: issue #19 item 4, the B = 1 step table on the H200 (main's code = session 24's final
# tree; the first call's B = 1 row was cut by its own 80 s limit). Results: $OUT/results.tgz.
D=$(cd "$(dirname "$0")" && pwd)
R=/tmp/r; rm -rf $R; mkdir -p $R; cp $0 $R/
snap() { tar czf $OUT/results.tmp -C /tmp r && mv $OUT/results.tmp $OUT/results.tgz; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1; cat $R/gpu.txt
grep -q H200 $R/gpu.txt || { echo "not an H200: stop"; snap; exit 3; }
export BITDECODE_CACHE_DIR=/tmp/bdc; mkdir -p /tmp/bdc
T0=$(date +%s)
timeout 230 $D/bitdecode bench model --ctx 1k,32k,128k --kv fp16,int4,int2 --batch 1 --steps 32 > $R/b1.log 2>&1; echo "rc=$? $(( $(date +%s) - T0 ))s" >> $R/b1.log
snap; tail -n 14 $R/b1.log
