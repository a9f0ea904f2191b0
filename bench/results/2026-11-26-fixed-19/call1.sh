#!/bin/bash
# Session 25 (the fused merge by ticket, v2.25) call 1: the GPU tests of the new build (four
# processes in parallel), then main bb599c2 (bitdecode-base) against v2.25 (bitdecode-new)
# alternated A B A B on the brief's bench attn grid, then main's binary with fewer splits by
# environment at the few-tile rows, then v2.25's timeline (ticket, and count by environment).
set -o pipefail
D=$PWD/.gpu-fixed
t0=$(date +%s)
el() { echo $(( $(date +%s)-t0 )); }
python3 -c "import lzma,tarfile; tarfile.open(fileobj=lzma.open('$D/bins.tar.xz')).extractall('$D/bin')" && chmod +x $D/bin/*
echo "unpacked $(el)s" >> $OUT/times.txt
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm,temperature.gpu,power.draw --format=csv > $OUT/gpu.txt 2>&1
T=$D/bin/kernels.test
mkdir -p $OUT/t
( cd gpu/kernels && timeout 210 $T -test.v -test.timeout 208s -test.run 'TestGPUDecodeMatchesReference/mma' > $OUT/t/ref.log 2>&1; echo "t_ref rc=$? $(el)s" >> $OUT/times.txt ) &
( cd gpu/kernels && timeout 210 $T -test.v -test.timeout 208s -test.run 'TestGPUDecodeTicketMatchesCount|TestGPUDecodeOneSplitMatchesCombine' > $OUT/t/ticket.log 2>&1; echo "t_ticket rc=$? $(el)s" >> $OUT/times.txt ) &
( cd gpu/kernels && timeout 210 $T -test.v -test.timeout 208s -test.run 'TestGPUDecodeRingMatchesPipeline|TestGPUDecodeLookAheadMatchesRefold|TestGPUDecodeTimelineSameBits' > $OUT/t/ring.log 2>&1; echo "t_ring rc=$? $(el)s" >> $OUT/times.txt ) &
( cd gpu/kernels && timeout 210 $T -test.v -test.timeout 208s -test.run 'TestGPUDecodeLong|TestGPUDecodeWindowMatchesReference/mma' > $OUT/t/long.log 2>&1; echo "t_long rc=$? $(el)s" >> $OUT/times.txt ) &
wait
A="bench attn --device cuda --kv int4,int2,k4v2 --grid 1x8192,1x32768,1x131072,32x8192,8x32768,16x32768,128x8192"
S="bench attn --device cuda --kv int4,int2,k4v2 --grid 32x8192,8x32768,16x32768"
L="bench attn --device cuda --kv int4,int2 --grid 1x8192,1x32768"
mkdir -p $OUT/b
run() { # name env binary args...
  local n=$1 e=$2 b=$3; shift 3
  env $e timeout 120 $D/bin/$b "$@" > $OUT/b/$n.md 2>&1; echo "$n rc=$? end $(el)s" >> $OUT/times.txt
}
run attn_base1 BITDECODE_PTXAS_VERBOSE=1 bitdecode-base $A
run attn_new1 BITDECODE_PTXAS_VERBOSE=1 bitdecode-new $A
run attn_base2 X=1 bitdecode-base $A
run attn_new2 X=1 bitdecode-new $A
run split256_base BITDECODE_DECODE_SPLITS=target:256 bitdecode-base $S
run split512_base BITDECODE_DECODE_SPLITS=target:512 bitdecode-base $S
run tl_new BITDECODE_DECODE_TIMELINE=1 bitdecode-new $L
run tl_count "BITDECODE_DECODE_TIMELINE=1 BITDECODE_DECODE_MERGE=count" bitdecode-new $L
cd $OUT && tar czf tests.tgz t && tar czf bench.tgz b && rm -rf t b
