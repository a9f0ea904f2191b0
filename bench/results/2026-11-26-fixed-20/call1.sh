#!/bin/bash
# Session 28 (fixed-20) call 1: measure before changing. One binary (s20-fixed
# at its first commit: main 14e33c2's kernels, the timeline's two new prologue
# marks, kTLLens / kTLQuery, in the timeline build only). The timeline at
# 1 x 1K / 8K / 32K (int4, int2), the same with one split a head
# (SPLITS=target:8) and with 256-token splits (MINSPLIT=256) at 1K-2K; then
# the plain build's plans at 1 x 1K-8K: default, one split, MINSPLIT 256 and
# 128, alternated; decode_wgmma (fp16, int4 KT) and torch SDPA for scale.
set -o pipefail
D=$PWD/.gpu-fixed
W=/tmp/w; R=$W/r; mkdir -p $R
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
tar xJf $D/bins.tar.xz -C $W && chmod +x $W/bitdecode
B=$W/bitdecode
pack() { (cd $W && tar czf $OUT/results.tgz r); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
python3 -c "import flashinfer; print('flashinfer', flashinfer.__version__)" > $R/flashinfer.txt 2>&1
# warm the CUBIN caches: plain and timeline builds, both kernels
( timeout 100 $B bench attn --device cuda --kv int4,int2,k4v2,fp16,int4:kt --grid 1x1024 > $R/warm.md 2>&1; echo "warm rc=$? $(el)s" >> $R/times.txt ) &
( BITDECODE_DECODE_TIMELINE=1 timeout 100 $B bench attn --device cuda --kv int4,int2 --grid 1x1024 > $R/warm_tl.md 2>&1; echo "warm_tl rc=$? $(el)s" >> $R/times.txt ) &
( PYTHONUNBUFFERED=1 timeout 100 python3 bench/anchors/sdpa_decode.py --json $R/sdpa.json --grid 1x1024,1x2048,1x8192,1x32768 > $R/sdpa.log 2>&1; echo "sdpa rc=$? $(el)s" >> $R/times.txt ) &
wait
pack
END=275
step() { local n=$1 lim=$2; shift 2; if [ $(el) -lt $lim ]; then timeout $(( END - $(el) )) "$@" > $R/$n.md 2>&1; echo "$n rc=$? $(el)s" >> $R/times.txt; else echo "$n skipped at $(el)s" >> $R/times.txt; fi; pack; }
G="bench attn --device cuda --kv int4,int2,k4v2 --grid 1x1024,1x2048,1x4096,1x8192"
TL=BITDECODE_DECODE_TIMELINE=1
step tl 200 env $TL BITDECODE_DECODE_TIMELINE_CSV=$R/tl.csv $B bench attn --device cuda --kv int4,int2 --grid 1x1024,1x8192,1x32768
step tl_one 210 env $TL BITDECODE_DECODE_SPLITS=target:8 BITDECODE_DECODE_TIMELINE_CSV=$R/tl_one.csv $B bench attn --device cuda --kv int4,int2 --grid 1x1024,1x2048,1x8192
step tl_256 215 env $TL BITDECODE_DECODE_MINSPLIT=256 BITDECODE_DECODE_TIMELINE_CSV=$R/tl_256.csv $B bench attn --device cuda --kv int4,int2 --grid 1x1024,1x2048
step p_def1 225 $B $G
step p_one1 230 env BITDECODE_DECODE_SPLITS=target:8 $B $G
step p_256_1 235 env BITDECODE_DECODE_MINSPLIT=256 $B $G
step p_128_1 240 env BITDECODE_DECODE_MINSPLIT=128 $B bench attn --device cuda --kv int4,int2,k4v2 --grid 1x1024,1x2048
step p_wg 245 $B bench attn --device cuda --kv fp16,int4:kt --grid 1x1024,1x2048,1x8192,1x32768
step p_def2 250 $B $G
step p_one2 255 env BITDECODE_DECODE_SPLITS=target:8 $B $G
step p_256_2 260 env BITDECODE_DECODE_MINSPLIT=256 $B $G
step p_128_2 265 env BITDECODE_DECODE_MINSPLIT=128 $B bench attn --device cuda --kv int4,int2,k4v2 --grid 1x1024,1x2048
for f in $R/*.csv; do [ -f $f ] && xz -9 $f; done
pack
cat $R/times.txt $R/gpu.txt $R/flashinfer.txt
cat $R/sdpa.json; tail -3 $R/sdpa.log
for f in p_def1 p_one1 p_256_1 p_128_1 p_def2 p_one2 p_256_2 p_128_2 p_wg; do echo "== $f"; grep -h 'read ceiling\|  B=' $R/$f.md | cut -c1-130; done
echo "== tl prologue"; grep -h 'timeline\|prologue\|first tile\|per tile\|partial:\|count:\|merge:\|one split\|end: stamp' $R/tl.md $R/tl_one.md $R/tl_256.md | cut -c1-150
