#!/bin/bash
# Session 28 (fixed-20) call 2: the GPU tests of the new build (s20-fixed
# 6fc24a5: decode_mma's one-CTA-an-SM re-cut of one sequence's plan) in
# parallel processes while both binaries warm their CUBIN caches; then main
# 14e33c2 (bitdecode-base) and s20-fixed (bitdecode-new) alternated A B A B
# on the brief's grid plus the re-cut rows (1 x 2K, 1 x 4K); then B = 1 steps
# at the contexts whose plan changes, and the new plan's timeline.
set -o pipefail
D=$PWD/.gpu-fixed
W=/tmp/w; R=$W/r; mkdir -p $R
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
tar xJf $D/bins.tar.xz -C $W && chmod +x $W/bitdecode-* $W/*.test
pack() { (cd $W && tar czf $OUT/results.tgz r); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
T="-test.v -test.count=1"
( cd gpu/kernels && timeout 152 $W/kernels.test $T -test.timeout 150s -test.run 'TestGPUDecodeMatchesReference/mma' > $R/t_mma.log 2>&1; echo "t_mma rc=$? $(el)s" >> $R/times.txt ) &
( cd gpu/kernels && timeout 152 $W/kernels.test $T -test.timeout 150s -test.run 'TestGPUDecodeOneSplitMatchesCombine|TestGPUDecodeLong' > $R/t_split.log 2>&1; echo "t_split rc=$? $(el)s" >> $R/times.txt ) &
( cd gpu/kernels && timeout 152 $W/kernels.test $T -test.timeout 150s -test.run 'TestGPUDecodeRingMatchesPipeline|TestGPUDecodeLookAheadMatchesRefold|TestGPUDecodeTimelineSameBits' > $R/t_bits.log 2>&1; echo "t_bits rc=$? $(el)s" >> $R/times.txt ) &
( cd kvcache/gpukv && timeout 152 $W/gpukv.test $T -test.timeout 150s -test.run 'TestGPUGraphReplaySameBits|TestGPUBatchInvariantLogits' > $R/t_kv.log 2>&1; echo "t_kv rc=$? $(el)s" >> $R/times.txt ) &
WK="bench attn --device cuda --kv int4,int2,k4v2 --grid 1x1024"
( timeout 120 $W/bitdecode-base $WK > $R/warm_base.md 2>&1; echo "warm_base rc=$? $(el)s" >> $R/times.txt ) &
( timeout 120 $W/bitdecode-new $WK > $R/warm_new.md 2>&1; echo "warm_new rc=$? $(el)s" >> $R/times.txt ) &
wait
pack
END=232
step() { local n=$1 lim=$2; shift 2; if [ $(el) -lt $lim ]; then timeout $(( END - $(el) )) "$@" > $R/$n.md 2>&1; echo "$n rc=$? $(el)s" >> $R/times.txt; else echo "$n skipped at $(el)s" >> $R/times.txt; fi; pack; }
G="bench attn --device cuda --kv int4,int2,k4v2 --grid 1x1024,1x2048,1x4096,1x8192,1x32768,1x131072,32x8192"
M="bench model --batch 1 --ctx 1k,4k --kv int4,int2 --steps 32 --no-linears"
step base1 200 $W/bitdecode-base $G
step new1 205 $W/bitdecode-new $G
step base2 210 $W/bitdecode-base $G
step new2 215 $W/bitdecode-new $G
step m_base 218 $W/bitdecode-base $M
step m_new 222 $W/bitdecode-new $M
step tl_new 226 env BITDECODE_DECODE_TIMELINE=1 $W/bitdecode-new bench attn --device cuda --kv int4,int2 --grid 1x1024,1x2048,1x4096
cat $R/times.txt $R/gpu.txt
grep -h -- '--- \(PASS\|FAIL\)\|^FAIL\|^ok\|panic' $R/t_*.log | grep -v '^    ---' | head -30
for f in base1 new1 base2 new2; do echo "== $f"; grep -h 'read ceiling\|  B=' $R/$f.md | cut -c1-130; done
for f in m_base m_new; do echo "== $f"; grep -v '^$' $R/$f.md | tail -8 | cut -c1-160; done
