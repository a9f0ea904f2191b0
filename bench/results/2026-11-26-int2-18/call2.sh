#!/bin/bash
# Session 24 call 2: the look-ahead's bitwise test for modes 1 and 2 and the float64 reference test
# under mode 2, then main c235c2d (base) against v2.24 mode 1 (new, the default) and mode 2
# (BITDECODE_DECODE_LA=2) alternated, int2 at the large rows and at small batch, then bench model.
set -o pipefail
D=$PWD/.gpu-int2
t0=$(date +%s)
el() { echo $(( $(date +%s)-t0 )); }
python3 -c "import lzma,tarfile; tarfile.open(fileobj=lzma.open('$D/bins.tar.xz')).extractall('$D/bin')" && chmod +x $D/bin/*
echo "unpacked $(el)s" >> $OUT/times.txt
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm,temperature.gpu,power.draw --format=csv > $OUT/gpu.txt 2>&1
T=$D/bin/kernels.test
( cd gpu/kernels && timeout 200 $T -test.v -test.timeout 198s -test.run 'TestGPUDecodeLookAheadMatchesRefold' > $OUT/t_la.log 2>&1; echo "t_la rc=$? $(el)s" >> $OUT/times.txt ) &
( cd gpu/kernels && BITDECODE_DECODE_LA=2 timeout 200 $T -test.v -test.timeout 198s -test.run 'TestGPUDecodeMatchesReference/mma|TestGPUDecodeRingMatchesPipeline' > $OUT/t_ref2.log 2>&1; echo "t_ref2 rc=$? $(el)s" >> $OUT/times.txt ) &
wait
A="bench attn --device cuda --kv int2 --grid 128x8192,55x32768,100x32768,16x32768,1x8192,1x32768,1x131072,32x8192,8x32768"
M="bench model --ctx 32k --kv fp16,int2 --batch max --steps 16 --no-linears"
run() { # name env binary args...
  local n=$1 e=$2 b=$3; shift 3
  env $e timeout 100 $D/bin/$b "$@" > $OUT/b_$n.md 2>&1; echo "$n rc=$? end $(el)s" >> $OUT/times.txt
}
for i in 1 2; do
  run attn_base$i BITDECODE_PTXAS_VERBOSE=$((i==1)) bitdecode-base $A
  run attn_la1_$i BITDECODE_PTXAS_VERBOSE=$((i==1)) bitdecode-new $A
  run attn_la2_$i BITDECODE_DECODE_LA=2 BITDECODE_PTXAS_VERBOSE=$((i==1)) bitdecode-new $A
done
for i in 1 2; do
  run model_base$i X=1 bitdecode-base $M
  run model_la1_$i X=1 bitdecode-new $M
  run model_la2_$i BITDECODE_DECODE_LA=2 bitdecode-new $M
done
cd $OUT && tar czf bench.tgz b_*.md && rm -f b_*.md
