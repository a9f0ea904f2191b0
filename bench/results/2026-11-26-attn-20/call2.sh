#!/bin/bash
# Session 26 (attn-20) call 2: the GPU tests of the new build (three processes)
# while both binaries warm their CUBIN caches, then main 017cec0 (bitdecode-base)
# against v2.27-v2.29 (bitdecode-new) alternated A B A B: the brief's grid once
# each, the one-sequence rows (and 1 x 2K) a second time, fp16 at 1 x 128K
# (decode_wgmma's plan changes there too), then the new build's timeline.
set -o pipefail
D=$PWD/.gpu-attn
W=/tmp/w; R=$W/r; mkdir -p $R
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
tar xJf $D/bins.tar.xz -C $W && chmod +x $W/bitdecode-* $W/*.test
echo "unpacked $(el)s" >> $R/times.txt
pack() { (cd $W && tar czf $OUT/results.tgz r); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
T="-test.v -test.count=1 -test.timeout 118s"
( cd gpu/kernels && timeout 120 $W/kernels.test $T -test.run 'TestGPUDecodeMatchesReference/mma' > $R/t_ref.log 2>&1; echo "t_ref rc=$? $(el)s" >> $R/times.txt ) &
( cd gpu/kernels && timeout 120 $W/kernels.test $T -test.run 'TestGPUDecodeOneSplitMatchesCombine|TestGPUDecodeTimelineSameBits|TestGPUDecodeRingMatchesPipeline|TestGPUDecodeLookAheadMatchesRefold|TestGPUDecodeLong' > $R/t_bits.log 2>&1; echo "t_bits rc=$? $(el)s" >> $R/times.txt ) &
( cd kvcache/gpukv && timeout 120 $W/gpukv.test $T -test.run 'TestGPUGraphReplaySameBits|TestGPUBatchInvariantLogits' > $R/t_kv.log 2>&1; echo "t_kv rc=$? $(el)s" >> $R/times.txt ) &
( timeout 110 $W/bitdecode-base bench attn --device cuda --kv int4,int2,k4v2,fp16 --grid 1x8192 > $R/warm_base.md 2>&1; echo "warm_base rc=$? $(el)s" >> $R/times.txt ) &
( timeout 110 $W/bitdecode-new bench attn --device cuda --kv int4,int2,k4v2,fp16 --grid 1x8192 > $R/warm_new.md 2>&1; echo "warm_new rc=$? $(el)s" >> $R/times.txt ) &
( BITDECODE_DECODE_TIMELINE=1 timeout 110 $W/bitdecode-new bench attn --device cuda --kv int4 --grid 1x8192 > $R/warm_tl.md 2>&1; echo "warm_tl rc=$? $(el)s" >> $R/times.txt ) &
wait
pack
# step NAME LIMIT cmd...: run if fewer than LIMIT seconds have gone
step() { local n=$1 lim=$2; shift 2; if [ $(el) -lt $lim ]; then timeout $(( 236 - $(el) )) "$@" > $R/$n.md 2>&1; echo "$n rc=$? $(el)s" >> $R/times.txt; else echo "$n skipped at $(el)s" >> $R/times.txt; fi; pack; }
A="bench attn --device cuda --kv int4,int2,k4v2 --grid 1x8192,1x32768,1x131072,32x8192,128x8192"
O="bench attn --device cuda --kv int4,int2,k4v2 --grid 1x2048,1x8192,1x32768,1x131072"
F="bench attn --device cuda --kv fp16 --grid 1x131072"
step base1 200 $W/bitdecode-base $A
step new1 205 $W/bitdecode-new $A
step base2 215 $W/bitdecode-base $O
step new2 220 $W/bitdecode-new $O
step fp16_base 225 $W/bitdecode-base $F
step fp16_new 228 $W/bitdecode-new $F
BITDECODE_DECODE_TIMELINE=1 BITDECODE_DECODE_TIMELINE_CSV=$R/tl2.csv step tl_new 230 $W/bitdecode-new bench attn --device cuda --kv int4,int2 --grid 1x8192,1x131072
xz -9 $R/tl2.csv 2>/dev/null; pack
cat $R/times.txt $R/gpu.txt
grep -h -- '--- \(PASS\|FAIL\)\|^FAIL\|^ok\|panic' $R/t_*.log | grep -v '^    ---' | head -30
for f in base1 new1 base2 new2 fp16_base fp16_new; do echo "== $f"; grep -h 'read ceiling\|  B=1 \|B=32 \|B=128 \| auto' $R/$f.md | grep -v '^|' | head -16; done
