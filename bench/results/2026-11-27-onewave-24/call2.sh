#!/bin/bash
# Session 31 (onewave-24) call 2. bitdecode-new = 4b27aab (v2.34 lean by
# recomputation, BD_SEQ_LEAN=1: call 1's), bitdecode-park = the working tree
# with BD_SEQ_LEAN=2 (the values after the loop parked in shared memory),
# bitdecode-main = main d57e2de. Phase 0: CUDA 13's NVRTC on the look-ahead
# kernel in four builds (ptxas -v, SASS, the tile loops' LDL/STL). Phase 1: the
# park build's GPU tests beside the warm-ups. Phase 2: int2's batch-invariant
# rows base (park binary, SEQLEAN=0: main's kernel) / recompute / park,
# alternated twice; the fixed kernel over the same partition; the model step.
set -o pipefail
D=$PWD/.gpu-onewave
W=/tmp/w; R=$W/r; mkdir -p $R $W/sass
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
tar xJf $D/bins2.tar.xz -C $W && chmod +x $W/bitdecode-* $W/*.test
M=$W/bitdecode-main; N=$W/bitdecode-new; P=$W/bitdecode-park
pack() { (cd $W && tar czf $OUT/results.tgz r); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
LIB=$(ls /usr/local/cuda/lib64/libnvrtc.so.13* /usr/local/cuda*/targets/x86_64-linux/lib/libnvrtc.so.13* 2>/dev/null | head -1)
[ -z "$LIB" ] && LIB=$(find / -name 'libnvrtc.so.13*' -not -path '*/proc/*' 2>/dev/null | head -1)
echo "nvrtc: $LIB" > $R/c13.txt
LA='mma::decode_mma<128, 2, 2, true, 1, 1, 8, false, 0, 1, true, false, true>'
c13() { local n=$1; shift; ( export XOPT="$*"; echo "== $n ($XOPT)"; python3 $D/nvc13.py $LIB $D/src $W/sass/$n "$LA" 2>&1 | grep -v Compiling; python3 $D/loops.py $W/sass/$n.sass 2>&1 | head -3 ) > $R/c13_$n.txt 2>&1 & }
c13 seq ""
c13 lean1 -DBD_SEQ_LEAN=1
c13 lean2 -DBD_SEQ_LEAN=2
c13 fixed -DBD_SEQ_SPLITS=0
T="-test.v -test.count=1"
tst() { local n=$1 dir=$2 bin=$3 lim=$4 pat=$5; shift 5; ( cd $dir && env "$@" timeout $((lim+5)) $W/$bin $T -test.timeout ${lim}s -test.run "$pat" > $R/t_$n.log 2>&1; echo "t_$n rc=$? $(el)s" >> $R/times.txt ) & }
tst seq gpu/kernels kernels-park.test 150 'TestGPUDecodeSeqSplits' X=1
tst lean gpu/kernels kernels-park.test 150 'TestGPUDecodeSeqSplits' BITDECODE_DECODE_SEQLEAN=1
tst la gpu/kernels kernels-park.test 150 'TestGPUDecodeLookAheadMatchesRefold|TestGPUDecodeOneSplitMatchesCombine' X=1
tst long gpu/kernels kernels-park.test 150 'TestGPUDecodeLong' X=1
tst kv kvcache/gpukv gpukv-park.test 150 'TestGPUBatchInvariantLogits|TestGPUCacheBatchInvariant|TestGPUGraphReplaySameBits' X=1
warm() { local n=$1; shift; ( timeout 120 "$@" > $R/warm_$n.md 2>&1; echo "warm_$n rc=$? $(el)s" >> $R/times.txt ) & }
WG="--grid 1x8192,1x32768"
warm p env BITDECODE_CACHE_DIR=$W/cp BITDECODE_PTXAS_VERBOSE=1 $P bench attn --device cuda --batch-invariant --kv int2 $WG
warm p0 env BITDECODE_CACHE_DIR=$W/c0 BITDECODE_DECODE_SEQLEAN=0 $P bench attn --device cuda --batch-invariant --kv int2 $WG
warm n env BITDECODE_CACHE_DIR=$W/cn $N bench attn --device cuda --batch-invariant --kv int2 $WG
warm f env BITDECODE_CACHE_DIR=$W/cf BITDECODE_PTXAS_VERBOSE=1 BITDECODE_DECODE_SPLITS=target:128 $P bench attn --device cuda --kv int2 --grid 1x32768
warm mm env BITDECODE_CACHE_DIR=$W/cm BITDECODE_BATCH_INVARIANT=1 $M bench model --batch 1 --ctx 32k --kv int2 --steps 2 --no-linears
warm mp env BITDECODE_CACHE_DIR=$W/cmp BITDECODE_BATCH_INVARIANT=1 $P bench model --batch 1 --ctx 32k --kv int2 --steps 2 --no-linears
wait
(cd $W && tar cJf $OUT/sass13.tar.xz sass)
pack
END=288
step() { local n=$1 lim=$2; shift 2; if [ $(el) -lt $lim ]; then timeout $(( END - $(el) )) "$@" > $R/$n.md 2>&1; echo "$n rc=$? $(el)s" >> $R/times.txt; else echo "$n skipped at $(el)s" >> $R/times.txt; fi; pack; }
A="bench attn --device cuda --kv int2"
G="--grid 1x32768,1x131072,8x32768,100x32768"
for i in 1 2; do
step a$i 240 env BITDECODE_CACHE_DIR=$W/c0 BITDECODE_DECODE_SEQLEAN=0 $P $A --batch-invariant $G
step r$i 245 env BITDECODE_CACHE_DIR=$W/cn $N $A --batch-invariant $G
step p$i 250 env BITDECODE_CACHE_DIR=$W/cp $P $A --batch-invariant $G
done
step m_main 262 env BITDECODE_CACHE_DIR=$W/cm BITDECODE_BATCH_INVARIANT=1 $M bench model --batch max --ctx 32k --kv int2 --steps 8 --no-linears
step m_park 272 env BITDECODE_CACHE_DIR=$W/cmp BITDECODE_BATCH_INVARIANT=1 $P bench model --batch max --ctx 32k --kv int2 --steps 8 --no-linears
step f100 276 env BITDECODE_CACHE_DIR=$W/cf BITDECODE_DECODE_SPLITS=target:12800 $P $A --grid 100x32768
step f8 280 env BITDECODE_CACHE_DIR=$W/cf BITDECODE_DECODE_SPLITS=target:1024 $P $A --grid 8x32768
step f1 283 env BITDECODE_CACHE_DIR=$W/cf BITDECODE_DECODE_SPLITS=target:128 $P $A --grid 1x32768
pack
cat $R/times.txt $R/gpu.txt $R/c13*.txt
grep -h -- '--- \(PASS\|FAIL\)\|^FAIL\|^ok\|panic' $R/t_*.log | grep -v '^    ---' | head -20
for f in a1 r1 p1 a2 r2 p2 f100 f8 f1; do echo "== $f"; grep -h 'read ceiling\|^  auto' $R/$f.md | sed 's/  */ /g;s/ int2:kc128:v128:res256//;s/auto:mma+qk8//' | cut -c1-100; done
for f in m_main m_park; do echo "== $f"; grep -v '^$' $R/$f.md | tail -1 | cut -c1-200; done
for f in warm_p warm_f; do echo "== $f"; grep -h "spill\|decode_mma<" $R/$f.md | grep -v "detected" | sed 's/ptxas *//' | cut -c1-110 | head -8; done
