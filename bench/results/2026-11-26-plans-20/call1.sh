#!/bin/bash
# Session 27 (plans-20) call 1: the GPU tests of the new build (s20-plans:
# every one-sequence one-wave plan cut into the shortest longest runs) in
# parallel processes while both binaries warm their CUBIN caches; then main
# 3536c42 (bitdecode-base) against s20-plans (bitdecode-new) alternated
# A B A B on the rows whose plan changes, the knob rows (SPLITS=largest on
# the new build: v2.27 at int4:kt and int8 1 x 128K; PLANES_SPLITS=target:264
# on main: v2.27's rule for the planes kernel), then the brief's grid once each.
set -o pipefail
D=$PWD/.gpu-plans
W=/tmp/w; R=$W/r; mkdir -p $R
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
tar xJf $D/bins.tar.xz -C $W && chmod +x $W/bitdecode-* $W/*.test
pack() { (cd $W && tar czf $OUT/results.tgz r); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
T="-test.v -test.count=1 -test.timeout 158s"
( cd gpu/kernels && timeout 160 $W/kernels.test $T -test.run 'TestGPUDecodeMatchesReference/mma' > $R/t_mma.log 2>&1; echo "t_mma rc=$? $(el)s" >> $R/times.txt ) &
( cd gpu/kernels && timeout 160 $W/kernels.test $T -test.run 'TestGPUDecodeMatchesReference/wgmma|TestGPUDecodeLong' > $R/t_wg.log 2>&1; echo "t_wg rc=$? $(el)s" >> $R/times.txt ) &
( cd gpu/kernels && timeout 160 $W/kernels.test $T -test.run 'TestGPUDecodeOneSplitMatchesCombine|TestGPUPlanesSplits/mma' > $R/t_split.log 2>&1; echo "t_split rc=$? $(el)s" >> $R/times.txt ) &
( cd kvcache/gpukv && timeout 160 $W/gpukv.test $T -test.run 'TestGPUGraphReplaySameBits|TestGPUBatchInvariantLogits' > $R/t_kv.log 2>&1; echo "t_kv rc=$? $(el)s" >> $R/times.txt ) &
WK="bench attn --device cuda --kv int4,int4:kt,int8,int2,fp16,bw:h100:w0:s0,bw:m100:w0:s0,bw:l100:w0:s0,bw:h20:m40:l40:w0:s0 --grid 1x2048"
( timeout 120 $W/bitdecode-base $WK > $R/warm_base.md 2>&1; echo "warm_base rc=$? $(el)s" >> $R/times.txt ) &
( timeout 120 $W/bitdecode-new $WK > $R/warm_new.md 2>&1; echo "warm_new rc=$? $(el)s" >> $R/times.txt ) &
wait
pack
END=292
# step NAME LIMIT cmd...: run if fewer than LIMIT seconds have gone
step() { local n=$1 lim=$2; shift 2; if [ $(el) -lt $lim ]; then timeout $(( END - $(el) )) "$@" > $R/$n.md 2>&1; echo "$n rc=$? $(el)s" >> $R/times.txt; else echo "$n skipped at $(el)s" >> $R/times.txt; fi; pack; }
C="bench attn --device cuda --kv int4,int2,fp16 --grid 1x1024,1x2048,1x131072"
K="bench attn --device cuda --kv int4:kt,int8 --grid 1x131072"
P="bench attn --device cuda --kv bw:h100:w0:s0,bw:m100:w0:s0,bw:l100:w0:s0,bw:h20:m40:l40:w0:s0 --grid 1x131072"
G="bench attn --device cuda --kv int4,int4:kt,int8,fp16 --grid 1x1024,1x2048,1x3072,1x131072"
Q="bench attn --device cuda --kv bw:h100:w0:s0,bw:m100:w0:s0,bw:l100:w0:s0,bw:h20:m40:l40:w0:s0 --grid 16x32768"
step c_base1 260 $W/bitdecode-base $C
step c_new1 262 $W/bitdecode-new $C
step k_large1 264 env BITDECODE_DECODE_SPLITS=largest $W/bitdecode-new $K
step k_new1 266 $W/bitdecode-new $K
step p_base1 268 $W/bitdecode-base $P
step p_264_1 270 env BITDECODE_PLANES_SPLITS=target:264 $W/bitdecode-base $P
step c_base2 272 $W/bitdecode-base $C
step c_new2 274 $W/bitdecode-new $C
step k_large2 276 env BITDECODE_DECODE_SPLITS=largest $W/bitdecode-new $K
step k_new2 278 $W/bitdecode-new $K
step p_base2 280 $W/bitdecode-base $P
step p_264_2 282 env BITDECODE_PLANES_SPLITS=target:264 $W/bitdecode-base $P
step g_base 284 $W/bitdecode-base $G
step g_new 286 $W/bitdecode-new $G
step q_base 288 $W/bitdecode-base $Q
step q_new 289 $W/bitdecode-new $Q
cat $R/times.txt $R/gpu.txt
grep -h -- '--- \(PASS\|FAIL\)\|^FAIL\|^ok\|panic' $R/t_*.log | grep -v '^    ---' | head -30
for f in c_base1 c_new1 c_base2 c_new2 k_large1 k_new1 k_large2 k_new2 p_base1 p_264_1 p_base2 p_264_2; do echo "== $f"; grep -h 'read ceiling\|  B=' $R/$f.md | grep -v '^|' | cut -c1-150 | head -12; done
