#!/bin/bash
# Session 30 (int2one-23) call 2. bitdecode-main = main d56ce9d, bitdecode-new
# = s23-int2one cdb06cf (v2.33: plans of splitCap 0 compiled with
# BD_SEQ_SPLITS=0). The GPU tests of the new build in parallel processes while
# both binaries warm their CUBIN caches (with CUDA 13's ptxas report); then
# main and new alternated: the brief's grid once each, int2's rows again, the
# B = 1 8B step at 128K (int2, no linears), new's timeline at int2 1 x 128K.
set -o pipefail
D=$PWD/.gpu-int2one
W=/tmp/w; R=$W/r; mkdir -p $R
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
tar xJf $D/bins.tar.xz -C $W && chmod +x $W/bitdecode-* $W/*.test
B=$W/bitdecode-main; N=$W/bitdecode-new
pack() { (cd $W && tar czf $OUT/results.tgz r); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
T="-test.v -test.count=1"
tst() { local n=$1 dir=$2 bin=$3 lim=$4 pat=$5; ( cd $dir && timeout $((lim+5)) $W/$bin $T -test.timeout ${lim}s -test.run "$pat" > $R/t_$n.log 2>&1; echo "t_$n rc=$? $(el)s" >> $R/times.txt ) & }
tst ref gpu/kernels kernels.test 165 'TestGPUDecodeMatchesReference/mma'
tst seq gpu/kernels kernels.test 160 'TestGPUDecodeSeqSplits|TestGPUDecodeLookAheadMatchesRefold|TestGPUDecodeOneSplitMatchesCombine'
tst misc gpu/kernels kernels.test 160 'TestGPUDecodeLong|TestGPUDecodeTimelineSameBits|TestGPUDecodeRingMatchesPipeline|TestGPUDecodeOneSMTile'
tst kv kvcache/gpukv gpukv.test 160 'TestGPUGraphReplaySameBits|TestGPUBatchInvariantLogits|TestGPUCacheBatchInvariant'
G="--grid 1x8192,1x32768,1x131072,8x32768,100x32768"
warm() { local n=$1; shift; ( timeout 150 "$@" > $R/warm_$n.md 2>&1; echo "warm_$n rc=$? $(el)s" >> $R/times.txt ) & }
warm bptx env BITDECODE_PTXAS_VERBOSE=1 $B bench attn --device cuda --kv int2,int4,k4v2 $G
warm nptx env BITDECODE_PTXAS_VERBOSE=1 $N bench attn --device cuda --kv int2,int4,k4v2 $G
warm b $B bench attn --device cuda --kv int2,int4,k4v2 --grid 1x8192,1x131072
warm n $N bench attn --device cuda --kv int2,int4,k4v2 --grid 1x8192,1x131072
warm ntl env BITDECODE_DECODE_TIMELINE=1 $N bench attn --device cuda --kv int2 --grid 1x131072
warm mb $B bench model --batch 1 --ctx 1k --kv int2 --steps 2 --no-linears
warm mn $N bench model --batch 1 --ctx 1k --kv int2 --steps 2 --no-linears
wait
pack
END=292
step() { local n=$1 lim=$2; shift 2; if [ $(el) -lt $lim ]; then timeout $(( END - $(el) )) "$@" > $R/$n.md 2>&1; echo "$n rc=$? $(el)s" >> $R/times.txt; else echo "$n skipped at $(el)s" >> $R/times.txt; fi; pack; }
A="bench attn --device cuda"
step base1 215 $B $A --kv int2,int4,k4v2 $G
step new1 240 $N $A --kv int2,int4,k4v2 $G
step m_base 255 $B bench model --batch 1 --ctx 128k --kv int2 --steps 32 --no-linears
step m_new 265 $N bench model --batch 1 --ctx 128k --kv int2 --steps 32 --no-linears
step base2 273 $B $A --kv int2 $G
step new2 281 $N $A --kv int2 $G
step tl_new 287 env BITDECODE_DECODE_TIMELINE=1 $N $A --kv int2 --grid 1x131072
pack
cat $R/times.txt $R/gpu.txt
grep -h -- '--- \(PASS\|FAIL\)\|^FAIL\|^ok\|panic' $R/t_*.log | grep -v '^    ---' | head -30
for f in base1 new1 base2 new2; do echo "== $f"; grep -h '^read ceiling\|^| \(auto\|int\|k4\)' $R/$f.md | cut -d'|' -f2-4,7-11,14 | cut -c1-130; done
for f in m_base m_new; do echo "== $f"; grep -v '^$' $R/$f.md | tail -4 | cut -c1-160; done
for f in warm_bptx warm_nptx; do echo "== $f"; grep -h "registers\|spill\|decode_mma<" $R/$f.md | grep -A2 "decode_mma<" | grep -v "^--\|detected" | sed 's/ptxas *//' | cut -c1-150 | head -24; done
echo "== tl_new"; grep -h 'per tile\|first tile\|prologue:\|loop:\|end: first\|per-SM\|  auto' $R/tl_new.md | cut -c1-140
