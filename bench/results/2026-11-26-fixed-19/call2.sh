#!/bin/bash
# Session 25 call 2: v2.26 (decode_mma.cu's split rule: one wave of fewer splits at the few-tile
# rows). GPU tests of the new build (two processes), then main bb599c2 (bitdecode-base) against
# v2.26 (bitdecode-new) alternated A B A B on bench attn (the brief's grid plus four shapes whose
# plan the rule changes; the second pair only the changed rows), then bench model at the two
# batches whose plans change, alternated twice, and v2.26 with PDL off once.
set -o pipefail
D=$PWD/.gpu-fixed
t0=$(date +%s)
el() { echo $(( $(date +%s)-t0 )); }
python3 -c "import lzma,tarfile; tarfile.open(fileobj=lzma.open('$D/bins.tar.xz')).extractall('$D/bin')" && chmod +x $D/bin/*
echo "unpacked $(el)s" >> $OUT/times.txt
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm,temperature.gpu,power.draw --format=csv > $OUT/gpu.txt 2>&1
mkdir -p $OUT/t $OUT/b
( cd gpu/kernels && timeout 160 $D/bin/kernels.test -test.v -test.timeout 158s -test.run 'TestGPUDecodeMatchesReference/mma|TestSplitWavesFill|TestDecodeDependentLaunch' > $OUT/t/ref.log 2>&1; echo "t_ref rc=$? $(el)s" >> $OUT/times.txt ) &
( cd kvcache/gpukv && timeout 160 $D/bin/gpukv.test -test.v -test.timeout 158s -test.run 'TestGPUBatchInvariantLogits|TestGPUGraphReplaySameBits|TestGPUScheduler|TestGPUCacheMatchesReference' > $OUT/t/gpukv.log 2>&1; echo "t_gpukv rc=$? $(el)s" >> $OUT/times.txt ) &
wait
A="bench attn --device cuda --kv int4,int2,k4v2 --grid 1x8192,1x32768,1x131072,32x8192,8x32768,16x32768,128x8192,2x131072,4x32768,8x8192,32x4096"
A2="bench attn --device cuda --kv int4,int2,k4v2 --grid 32x8192,8x32768,16x32768,2x131072,4x32768,8x8192,32x4096"
M1="bench model --batch 32 --ctx 8k --kv int4,int2 --steps 16 --no-linears"
M2="bench model --batch 16 --ctx 32k --kv int4,int2 --steps 16 --no-linears"
run() { # name env binary args...
  local n=$1 e=$2 b=$3; shift 3
  env $e timeout 120 $D/bin/$b "$@" > $OUT/b/$n.md 2>&1; echo "$n rc=$? end $(el)s" >> $OUT/times.txt
}
run attn_base1 X=1 bitdecode-base $A
run attn_new1 X=1 bitdecode-new $A
run attn_base2 X=1 bitdecode-base $A2
run attn_new2 X=1 bitdecode-new $A2
for i in 1 2; do
  run m32x8k_base$i X=1 bitdecode-base $M1
  run m32x8k_new$i X=1 bitdecode-new $M1
  run m16x32k_base$i X=1 bitdecode-base $M2
  run m16x32k_new$i X=1 bitdecode-new $M2
done
run m32x8k_newoff BITDECODE_DECODE_PDL=off bitdecode-new $M1
run m16x32k_newoff BITDECODE_DECODE_PDL=off bitdecode-new $M2
cd $OUT && tar czf tests.tgz t && tar czf bench.tgz b && rm -rf t b
