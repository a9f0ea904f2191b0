#!/bin/bash
# Session 24 (int2 look-ahead refold, v2.24) call 1: the GPU tests of the new build (four processes in
# parallel), then main c235c2d (bitdecode-base) against v2.24 (bitdecode-new) alternated A B A B on
# bench attn, then bench model at max batch, base and new twice each.
set -o pipefail
D=$PWD/.gpu-int2
t0=$(date +%s)
el() { echo $(( $(date +%s)-t0 )); }
python3 -c "import lzma,tarfile; tarfile.open(fileobj=lzma.open('$D/bins.tar.xz')).extractall('$D/bin')" && chmod +x $D/bin/*
echo "unpacked $(el)s" >> $OUT/times.txt
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm,temperature.gpu,power.draw --format=csv > $OUT/gpu.txt 2>&1
T=$D/bin/kernels.test
( cd gpu/kernels && timeout 230 $T -test.v -test.timeout 228s -test.run 'TestGPUDecodeLookAheadMatchesRefold' > $OUT/t_la.log 2>&1; echo "t_la rc=$? $(el)s" >> $OUT/times.txt ) &
( cd gpu/kernels && timeout 230 $T -test.v -test.timeout 228s -test.run 'TestGPUDecodeMatchesReference/mma' > $OUT/t_ref.log 2>&1; echo "t_ref rc=$? $(el)s" >> $OUT/times.txt ) &
( cd gpu/kernels && timeout 230 $T -test.v -test.timeout 228s -test.run 'TestGPUDecodeRingMatchesPipeline|TestGPUDecodeOneSplitMatchesCombine|TestGPUDecodeLong' > $OUT/t_ring.log 2>&1; echo "t_ring rc=$? $(el)s" >> $OUT/times.txt ) &
( cd gpu/kernels && timeout 230 $T -test.v -test.timeout 228s -test.run 'TestGPUDecodeWindowMatchesReference/mma' > $OUT/t_win.log 2>&1; echo "t_win rc=$? $(el)s" >> $OUT/times.txt ) &
wait
A="bench attn --device cuda --kv int2,k4v2,fp16 --grid 128x8192,55x32768,100x32768,16x32768"
M="bench model --ctx 32k --kv fp16,int2 --batch max --steps 16 --no-linears"
run() { # name binary args...
  local n=$1 b=$2; shift 2
  timeout 100 $D/bin/$b "$@" > $OUT/b_$n.md 2>&1; echo "$n rc=$? end $(el)s" >> $OUT/times.txt
}
BITDECODE_PTXAS_VERBOSE=1 run attn_base1 bitdecode-base $A
BITDECODE_PTXAS_VERBOSE=1 run attn_new1 bitdecode-new $A
run attn_base2 bitdecode-base $A
run attn_new2 bitdecode-new $A
run model_base1 bitdecode-base $M
run model_new1 bitdecode-new $M
run model_base2 bitdecode-base $M
run model_new2 bitdecode-new $M
cd $OUT && tar czf bench.tgz b_*.md && rm -f b_*.md
