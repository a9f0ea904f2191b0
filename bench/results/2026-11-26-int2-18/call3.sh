#!/bin/bash
# Session 24 call 3: the final build (v2.24 mode 1 routed by split length; its kernels are call 2's,
# tested there): main c235c2d (base) against it (new) alternated on int2's grid, mode 2's attention
# once (with ptxas's report), and bench model at max batch (twice each) and at B = 1 (once each).
set -o pipefail
D=$PWD/.gpu-int2
t0=$(date +%s)
el() { echo $(( $(date +%s)-t0 )); }
python3 -c "import lzma,tarfile; tarfile.open(fileobj=lzma.open('$D/bins.tar.xz')).extractall('$D/bin')" && chmod +x $D/bin/*
echo "unpacked $(el)s" >> $OUT/times.txt
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm,temperature.gpu,power.draw --format=csv > $OUT/gpu.txt 2>&1
A="bench attn --device cuda --kv int2 --grid 128x8192,55x32768,100x32768,16x32768,1x8192,1x32768,1x131072,32x8192,8x32768"
A2="bench attn --device cuda --kv int2 --grid 128x8192,100x32768"
M="bench model --ctx 32k --kv fp16,int2 --batch max --steps 16 --no-linears"
M1="bench model --ctx 32k,128k --kv int2 --batch 1 --steps 32 --no-linears"
run() { # name binary [VAR=value ...] -- args...
  local n=$1 b=$2; shift 2
  local e=(); while [ "$1" != "--" ]; do e+=("$1"); shift; done; shift
  env "${e[@]}" timeout 100 $D/bin/$b "$@" > $OUT/b_$n.md 2>&1; echo "$n rc=$? end $(el)s" >> $OUT/times.txt
}
for i in 1 2; do
  run attn_base$i bitdecode-base BITDECODE_PTXAS_VERBOSE=$((i==1)) -- $A
  run attn_new$i bitdecode-new BITDECODE_PTXAS_VERBOSE=$((i==1)) -- $A
done
run attn_la2 bitdecode-new BITDECODE_DECODE_LA=2 BITDECODE_PTXAS_VERBOSE=1 -- $A2
for i in 1 2; do
  run model_base$i bitdecode-base X=1 -- $M
  run model_new$i bitdecode-new X=1 -- $M
done
run model1_base1 bitdecode-base X=1 -- $M1
run model1_new1 bitdecode-new X=1 -- $M1
cd $OUT && tar czf bench.tgz b_*.md && rm -f b_*.md
