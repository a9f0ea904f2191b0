#!/bin/bash
# Session 29 (one-21) call 1. bitdecode-base = main 5c86472, bitdecode-new =
# s21-one (v2.31: the fused merge by lanes, BITDECODE_DECODE_MERGE_WEIGHTS=
# shared gives v2.30's merge back in the same binary). GPU tests of the merge's
# bits first, in parallel with the CUBIN warm-ups; then base / new alternated
# on the one-sequence rows, the timeline (base, new) at 1 x 8K, and the plans
# the knobs allow: 64-token int2 tiles (MT=4), 32-token int4 tiles (MT=2),
# the cp.async ring (STAGES=3), 32 splits at 1 x 8K (SPLITS=target:256).
set -o pipefail
D=$PWD/.gpu-one
W=/tmp/w; R=$W/r; mkdir -p $R
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
tar xJf $D/bins.tar.xz -C $W && chmod +x $W/bitdecode-* $W/*.test
B=$W/bitdecode-base; N=$W/bitdecode-new
pack() { (cd $W && tar czf $OUT/results.tgz r); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
T="-test.v -test.count=1"
( cd gpu/kernels && timeout 175 $W/kernels.test $T -test.timeout 170s -test.run 'TestGPUDecodeMergeLanesMatchesShared|TestGPUDecodeOneSplitMatchesCombine' > $R/t_merge.log 2>&1; echo "t_merge rc=$? $(el)s" >> $R/times.txt ) &
( cd gpu/kernels && timeout 175 $W/kernels.test $T -test.timeout 170s -test.run 'TestGPUDecodeTimelineSameBits|TestGPUDecodeLong' > $R/t_tl.log 2>&1; echo "t_tl rc=$? $(el)s" >> $R/times.txt ) &
WG="bench attn --device cuda --grid 1x1024"
TL=BITDECODE_DECODE_TIMELINE=1
warm() { local n=$1; shift; ( timeout 150 "$@" > $R/warm_$n.md 2>&1; echo "warm_$n rc=$? $(el)s" >> $R/times.txt ) & }
warm b $B $WG --kv int4,int2,k4v2
warm n $N $WG --kv int4,int2,k4v2
warm btl env $TL $B $WG --kv int4,int2
warm ntl env $TL $N $WG --kv int4,int2
warm nsh env BITDECODE_DECODE_MERGE_WEIGHTS=shared $N $WG --kv int4,int2,k4v2
warm nsht env $TL BITDECODE_DECODE_MERGE_WEIGHTS=shared $N $WG --kv int4,int2
warm mt4 env BITDECODE_DECODE_MT=4 $N $WG --kv int2
warm mt4t env $TL BITDECODE_DECODE_MT=4 $N $WG --kv int2
warm mt2 env BITDECODE_DECODE_MT=2 $N $WG --kv int4
warm st3 env BITDECODE_DECODE_STAGES=3 $N $WG --kv int4,int2
wait
pack
END=290
step() { local n=$1 lim=$2; shift 2; if [ $(el) -lt $lim ]; then timeout $(( END - $(el) )) "$@" > $R/$n.md 2>&1; echo "$n rc=$? $(el)s" >> $R/times.txt; else echo "$n skipped at $(el)s" >> $R/times.txt; fi; pack; }
G="bench attn --device cuda --kv int4,int2,k4v2 --grid 1x1024,1x8192,1x32768,1x131072"
G8="bench attn --device cuda --kv int4,int2 --grid 1x8192"
step base1 230 $B $G
step new1 235 $N $G
step tl_base 240 env $TL $B bench attn --device cuda --kv int4,int2 --grid 1x8192
step tl_new 245 env $TL BITDECODE_DECODE_TIMELINE_CSV=$R/tl_new.csv $N bench attn --device cuda --kv int4,int2 --grid 1x8192
step base2 250 $B $G
step new2 255 $N $G
step shared1 258 env BITDECODE_DECODE_MERGE_WEIGHTS=shared $N $G8
step mt4 262 env BITDECODE_DECODE_MT=4 $N bench attn --device cuda --kv int2 --grid 1x1024,1x4096,1x8192,1x131072
step mt2 265 env BITDECODE_DECODE_MT=2 $N bench attn --device cuda --kv int4 --grid 1x8192
step st3 268 env BITDECODE_DECODE_STAGES=3 $N $G8
step t256 271 env BITDECODE_DECODE_SPLITS=target:256 $N $G8
step tl_mt4 275 env $TL BITDECODE_DECODE_MT=4 $N bench attn --device cuda --kv int2 --grid 1x1024,1x8192
step tl_t256 279 env $TL BITDECODE_DECODE_SPLITS=target:256 $N bench attn --device cuda --kv int4 --grid 1x8192
step new3 283 $N $G8
step shared2 286 env BITDECODE_DECODE_MERGE_WEIGHTS=shared $N $G8
for f in $R/*.csv; do [ -f $f ] && xz -9 $f; done
pack
cat $R/times.txt $R/gpu.txt
grep -h -- '--- \(PASS\|FAIL\)\|^FAIL\|^ok\|panic' $R/t_*.log | grep -v '^    ---' | head -20
for f in base1 new1 base2 new2 shared1 new3 shared2 mt4 mt2 st3 t256; do echo "== $f"; grep -h '^read ceiling\|^| int\|^| k4' $R/$f.md | cut -c1-130; done
for f in tl_base tl_new tl_mt4 tl_t256; do echo "== $f"; grep -h '^| \|^#\|^[a-z0-9]* B=' $R/$f.md | grep -v '^| format\|^|---' | cut -c1-110 | head -60; done
