#!/bin/bash
# Session 21 call 2: v2.20 rejected, so main's binary (/work/main 9d3f0e4) alone, plan variants by environment.
set -o pipefail
cd "$(dirname "$0")/.."
W=/tmp/w; mkdir -p $W
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
python3 -c "import tarfile; tarfile.open('.gpu-b1attn/bins.tar.xz','r:xz').extractall('$W')"
echo "unpacked $(el)s" >> $OUT/times.txt
B=$W/bins/bitdecode-main
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt 2>&1
step() { local n=$1 lim=$2; shift 2; if [ $(el) -lt $lim ]; then timeout $(( 78 - $(el) )) "$@" > $OUT/$n.md 2>&1; echo "$n rc=$? $(el)s" >> $OUT/times.txt; else echo "$n skipped at $(el)s" >> $OUT/times.txt; fi; }
A="bench attn --device cuda --kv int4,int2"
step base1 40 $B $A --grid 1x8192,1x32768,1x131072
BITDECODE_DECODE_SPLITS=target:512 step s512 55 $B $A --grid 1x32768,1x131072
BITDECODE_DECODE_SPLITS=target:1056 step s1056 62 $B $A --grid 1x131072
BITDECODE_PTXAS_VERBOSE=1 BITDECODE_DECODE_MT=8 step mt8 66 $B bench attn --device cuda --kv int4,k4v2 --grid 1x8192,1x32768
step base2 70 $B $A --grid 1x8192,1x32768,1x131072
cd $OUT && tar czf results.tgz *.md *.txt && rm -f *.md
