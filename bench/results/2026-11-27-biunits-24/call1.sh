#!/bin/bash
# Session 24 (helper s24-biunits) call 1: decode_mma's unit loop (PU, v2.35).
# bd-main = main 6d8511a, bd-new / kernels.test / gpukv.test = branch s24-biunits.
# Phase 0: CUDA 13's NVRTC on the batch-invariant instantiations, one unit and
# PU (ptxas -v, SASS, the tile loops' LDL/STL). Phase 1: the GPU tests (three
# processes) beside the bench warm-ups (one kernel cache per build and setting).
# Phase 2: alternated A/B: bench attn --batch-invariant int4,int2 and the
# batch-invariant model step at --batch max 32K, main / new / new UNITS=264 /
# new UNITS=1056.
set -o pipefail
D=$PWD/.gpu-biunits
W=/tmp/w; R=$W/r; mkdir -p $R $W/sass
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
tar xJf $D/bins.tar.xz -C $W && chmod +x $W/bd-* $W/*.test
M=$W/bd-main; N=$W/bd-new
pack() { (cd $W && tar czf $OUT/results.tgz r); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
LIB=$(ls /usr/local/cuda/lib64/libnvrtc.so.13* /usr/local/cuda*/targets/x86_64-linux/lib/libnvrtc.so.13* 2>/dev/null | head -1)
[ -z "$LIB" ] && LIB=$(find / -name 'libnvrtc.so.13*' -not -path '*/proc/*' 2>/dev/null | head -1)
echo "nvrtc: $LIB" > $R/c13.txt
P='mma::decode_mma<128, '
declare -A E=([LA]="2, 2, true, 1, 1, 8, false, 0, 1, true, false, true" [I4]="4, 4, true, 1, 1, 4, false, 0, 1, true, false, false" [K42]="4, 2, true, 1, 1, 4, false, 0, 1, true, false, false")
for n in LA I4 K42; do for pu in false true; do
  x=""; [ $n = LA ] && x=-DBD_SEQ_LEAN=1
  ( export XOPT="$x"; echo "== $n PU=$pu ($XOPT)"; python3 $D/nvc13.py $LIB $D/src $W/sass/${n}_$pu "$P${E[$n]}, $pu>" 2>&1 | grep -v Compiling; python3 $D/loops.py $W/sass/${n}_$pu.sass 2>&1 | head -3 ) > $R/c13_${n}_$pu.txt 2>&1 &
done; done
T="-test.v -test.count=1"
tst() { local n=$1 dir=$2 bin=$3 lim=$4 pat=$5; shift 5; ( cd $dir && env "$@" timeout $((lim+5)) $W/$bin $T -test.timeout ${lim}s -test.run "$pat" > $R/t_$n.log 2>&1; echo "t_$n rc=$? $(el)s" >> $R/times.txt ) & }
tst seq gpu/kernels kernels.test 160 'TestGPUDecodeSeqSplits$' X=1
tst kvl kvcache/gpukv gpukv.test 160 'TestGPUBatchInvariantLogits$' X=1
tst kvc kvcache/gpukv gpukv.test 160 'TestGPUCacheBatchInvariant$' X=1
warm() { local n=$1; shift; ( timeout 150 "$@" > $R/warm_$n.md 2>&1; echo "warm_$n rc=$? $(el)s" >> $R/times.txt ) & }
WA="bench attn --device cuda --batch-invariant --kv int4,int2 --grid 1x32768,8x32768"
WM="bench model --batch 1 --ctx 32k --kv int4,int2 --steps 2 --no-linears"
warm am env BITDECODE_CACHE_DIR=$W/cm $M $WA
warm an env BITDECODE_CACHE_DIR=$W/cn $N $WA
warm au env BITDECODE_CACHE_DIR=$W/cu BITDECODE_PTXAS_VERBOSE=1 BITDECODE_DECODE_UNITS=264 $N $WA
warm mm env BITDECODE_CACHE_DIR=$W/cmm BITDECODE_BATCH_INVARIANT=1 $M $WM
warm mn env BITDECODE_CACHE_DIR=$W/cmn BITDECODE_BATCH_INVARIANT=1 $N $WM
warm mu env BITDECODE_CACHE_DIR=$W/cmu BITDECODE_BATCH_INVARIANT=1 BITDECODE_DECODE_UNITS=264 $N $WM
wait
(cd $W && tar cJf $OUT/sass13.tar.xz sass)
pack
END=292
step() { local n=$1 lim=$2; shift 2; if [ $(el) -lt $lim ]; then timeout $(( END - $(el) )) "$@" > $R/$n.md 2>&1; echo "$n rc=$? $(el)s" >> $R/times.txt; else echo "$n skipped at $(el)s" >> $R/times.txt; fi; pack; }
A="bench attn --device cuda --batch-invariant --kv int4,int2 --grid 55x32768,100x32768,8x32768,1x32768"
MB="bench model --batch max --ctx 32k --kv int4,int2 --steps 8 --no-linears"
step a_m1 200 env BITDECODE_CACHE_DIR=$W/cm $M $A
step a_n1 210 env BITDECODE_CACHE_DIR=$W/cn $N $A
step a_u1 220 env BITDECODE_CACHE_DIR=$W/cu BITDECODE_DECODE_UNITS=264 $N $A
step a_v1 230 env BITDECODE_CACHE_DIR=$W/cu BITDECODE_DECODE_UNITS=1056 $N $A
for i in 1 2; do
step m_m$i 262 env BITDECODE_CACHE_DIR=$W/cmm BITDECODE_BATCH_INVARIANT=1 $M $MB
step m_n$i 266 env BITDECODE_CACHE_DIR=$W/cmn BITDECODE_BATCH_INVARIANT=1 $N $MB
step m_u$i 270 env BITDECODE_CACHE_DIR=$W/cmu BITDECODE_BATCH_INVARIANT=1 BITDECODE_DECODE_UNITS=264 $N $MB
step m_v$i 274 env BITDECODE_CACHE_DIR=$W/cmu BITDECODE_BATCH_INVARIANT=1 BITDECODE_DECODE_UNITS=1056 $N $MB
done
step a_u2 255 env BITDECODE_CACHE_DIR=$W/cu BITDECODE_DECODE_UNITS=264 $N $A
step a_m2 262 env BITDECODE_CACHE_DIR=$W/cm $M $A
step a_v2 266 env BITDECODE_CACHE_DIR=$W/cu BITDECODE_DECODE_UNITS=1056 $N $A
step a_n2 270 env BITDECODE_CACHE_DIR=$W/cn $N $A
pack
cat $R/times.txt $R/gpu.txt $R/c13*.txt
grep -h -- '--- \(PASS\|FAIL\)\|^FAIL\|^ok\|panic' $R/t_*.log | grep -v '^    ---' | head -20
for f in a_m1 a_n1 a_u1 a_v1 a_u2 a_m2 a_v2 a_n2; do echo "== $f"; grep -h 'read ceiling\|^  auto' $R/$f.md | sed 's/  */ /g' | cut -c1-110; done
for f in m_m1 m_n1 m_u1 m_v1 m_m2 m_n2 m_u2 m_v2; do echo "== $f"; grep -v '^$' $R/$f.md | tail -2 | cut -c1-200; done
grep -h "spill\|decode_mma<" $R/warm_au.md | grep -v detected | sed 's/ptxas *//' | cut -c1-120 | head -12
