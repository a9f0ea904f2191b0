#!/bin/bash
# Session 29 (one-21) call 2. bitdecode-base = main 5c86472, bitdecode-new =
# s21-one edad361 (v2.32: int2's 64-token tiles at one sequence of up to 4K,
# mmaOneSMTile). The GPU tests of the new build in parallel processes while
# both binaries warm their CUBIN caches; then base and new alternated on the
# brief's grid (A B), int2's routed rows (1 x 1K-4K) alternated twice more,
# the new plan's timeline at 1 x 1K / 4K, and B = 1 steps at 1K / 4K.
set -o pipefail
D=$PWD/.gpu-one
W=/tmp/w; R=$W/r; mkdir -p $R
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
tar xJf $D/bins.tar.xz -C $W && chmod +x $W/bitdecode-* $W/*.test
B=$W/bitdecode-base; N=$W/bitdecode-new
pack() { (cd $W && tar czf $OUT/results.tgz r); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
T="-test.v -test.count=1"
tst() { local n=$1 dir=$2 bin=$3 pat=$4; ( cd $dir && timeout 172 $W/$bin $T -test.timeout 170s -test.run "$pat" > $R/t_$n.log 2>&1; echo "t_$n rc=$? $(el)s" >> $R/times.txt ) & }
tst ref gpu/kernels kernels.test 'TestGPUDecodeMatchesReference/mma'
tst tile gpu/kernels kernels.test 'TestGPUDecodeOneSMTile|TestGPUDecodeOneSplitMatchesCombine|TestGPUDecodeLong'
tst bits gpu/kernels kernels.test 'TestGPUDecodeRingMatchesPipeline|TestGPUDecodeLookAheadMatchesRefold|TestGPUDecodeTimelineSameBits'
tst kv kvcache/gpukv gpukv.test 'TestGPUGraphReplaySameBits|TestGPUCacheLengthBuckets'
WG="bench attn --device cuda --grid 1x1024"
warm() { local n=$1; shift; ( timeout 150 "$@" > $R/warm_$n.md 2>&1; echo "warm_$n rc=$? $(el)s" >> $R/times.txt ) & }
warm b $B $WG --kv int4,int2,k4v2
warm n $N $WG --kv int4,int2,k4v2
warm ntl env BITDECODE_DECODE_TIMELINE=1 $N $WG --kv int2
wait
pack
END=292
step() { local n=$1 lim=$2; shift 2; if [ $(el) -lt $lim ]; then timeout $(( END - $(el) )) "$@" > $R/$n.md 2>&1; echo "$n rc=$? $(el)s" >> $R/times.txt; else echo "$n skipped at $(el)s" >> $R/times.txt; fi; pack; }
G="bench attn --device cuda --kv int4,int2,k4v2 --grid 1x1024,1x8192,1x32768,1x131072,32x8192"
G2="bench attn --device cuda --kv int2 --grid 1x1024,1x2048,1x3072,1x4096"
step base1 215 $B $G
step new1 245 $N $G
step i2base1 255 $B $G2
step i2new1 262 $N $G2
step i2base2 269 $B $G2
step i2new2 276 $N $G2
step tl_new 281 env BITDECODE_DECODE_TIMELINE=1 $N bench attn --device cuda --kv int2 --grid 1x1024,1x4096
step m_base 285 $B bench model --batch 1 --ctx 1k,4k --kv int2 --steps 32 --no-linears
step m_new 289 $N bench model --batch 1 --ctx 1k,4k --kv int2 --steps 32 --no-linears
pack
cat $R/times.txt $R/gpu.txt
grep -h -- '--- \(PASS\|FAIL\)\|^FAIL\|^ok\|panic' $R/t_*.log | grep -v '^    ---' | head -30
for f in base1 new1 i2base1 i2new1 i2base2 i2new2; do echo "== $f"; grep -h '^read ceiling\|^| ' $R/$f.md | grep -v '^| format\|^|---' | cut -d'|' -f2-4,7-11 | cut -c1-110; done
for f in m_base m_new; do echo "== $f"; grep -v '^$' $R/$f.md | tail -6 | cut -c1-160; done
