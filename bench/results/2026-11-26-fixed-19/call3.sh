#!/bin/bash
# Session 25 call 3: the final build (v2.26's split rule, and a grid of several sequences not a
# programmatic dependent) against main bb599c2: kvcache/gpukv's graph replay test, then bench
# model alternated A B A B at 32 x 8K and 16 x 32K, once at 2 x 32K and at B = 1 (unchanged plans).
set -o pipefail
D=$PWD/.gpu-fixed
t0=$(date +%s)
el() { echo $(( $(date +%s)-t0 )); }
python3 -c "import lzma,tarfile; tarfile.open(fileobj=lzma.open('$D/bins.tar.xz')).extractall('$D/bin')" && chmod +x $D/bin/*
echo "unpacked $(el)s" >> $OUT/times.txt
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm,temperature.gpu,power.draw --format=csv > $OUT/gpu.txt 2>&1
mkdir -p $OUT/b
( cd kvcache/gpukv && timeout 100 $D/bin/gpukv.test -test.v -test.timeout 98s -test.run 'TestGPUGraphReplaySameBits|TestGPUBatchInvariantLogits' > $OUT/b/t_gpukv.log 2>&1; echo "t_gpukv rc=$? $(el)s" >> $OUT/times.txt )
M1="bench model --batch 32 --ctx 8k --kv int4,int2 --steps 16 --no-linears"
M2="bench model --batch 16 --ctx 32k --kv int4,int2 --steps 16 --no-linears"
M3="bench model --batch 2 --ctx 32k --kv int4,int2 --steps 16 --no-linears"
M4="bench model --batch 1 --ctx 32k,128k --kv int4,int2 --steps 32 --no-linears"
run() { # name binary args...
  local n=$1 b=$2; shift 2
  timeout 100 $D/bin/$b "$@" > $OUT/b/$n.md 2>&1; echo "$n rc=$? end $(el)s" >> $OUT/times.txt
}
for i in 1 2; do
  run m32x8k_base$i bitdecode-base $M1
  run m32x8k_new$i bitdecode-new $M1
  run m16x32k_base$i bitdecode-base $M2
  run m16x32k_new$i bitdecode-new $M2
done
run m2x32k_base bitdecode-base $M3
run m2x32k_new bitdecode-new $M3
run m1_base bitdecode-base $M4
run m1_new bitdecode-new $M4
cd $OUT && tar czf bench.tgz b && rm -rf b
