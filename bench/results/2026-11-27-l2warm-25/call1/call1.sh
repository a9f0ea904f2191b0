#!/bin/bash
# s25-l2warm call 1 (2026-11-27): the decode kernels ask L2 for o's weights during the one-sequence
# attention (BITDECODE_DECODE_L2WARM, decode-step.md v37). base = main 7b6eed8, new = s25-l2warm.
# GPU tests of new in parallel with warming both binaries' CUBIN caches (CUDA 13's ptxas report for
# the attention's programs), then timed, one at a time: bench model B = 1 (1K/32K/128K, fp16/int4/
# int2) for base and new's modes alternated, bench attn int4,int2 1 x 8K/32K/128K base/tail/entry,
# a second round as time allows.
set -o pipefail
D=$PWD/.gpu-l2warm; W=/tmp/w; R=$W/r; mkdir -p $R
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
tar xJf $D/bins.tar.xz -C $W && chmod +x $W/base $W/new $W/*.test
cp $D/call1.sh $R/
B=$W/base; N=$W/new
pack() { (cd $W && tar czf $OUT/results.tmp r && mv $OUT/results.tmp $OUT/results.tgz); }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
echo "extracted $(el)s" >> $R/times.txt
TV="-test.v -test.count=1"
tst() { local n=$1 dir=$2 bin=$3 lim=$4 pat=$5; ( cd $dir && timeout $((lim+5)) $W/$bin $TV -test.timeout ${lim}s -test.run "$pat" > $R/t_$n.log 2>&1; echo "t_$n rc=$? $(el)s" >> $R/times.txt ) & }
tst kern gpu/kernels kernels.test 170 '^(TestGPUDecodeL2WarmSameBits|TestSessionOptions|TestParseTuning|TestGridDependentKernelsWait)$'
tst l2 kvcache/gpukv gpukv.test 170 '^TestGPUL2WarmSameBits$'
tst kv kvcache/gpukv gpukv.test 170 '^(TestGPUGraphReplaySameBits|TestGPUCacheBatchInvariant)$'
# modes: name binary L2WARM (- for unset)
MODES="base:$B:- off:$N:- tail:$N:tail entry:$N:entry tlast:$N:tail:last elast:$N:entry:last"
envof() { if [ "$1" = "-" ]; then echo "X=0"; else echo "BITDECODE_DECODE_L2WARM=$1"; fi; }
M="bench model --batch 1 --ctx 1k,32k,128k --kv fp16,int4,int2 --no-linears"
A="bench attn --device cuda --kv int4,int2"
( for m in $MODES; do n=${m%%:*}; r=${m#*:}; bin=${r%%:*}; v=${r#*:}
    timeout 100 env $(envof $v) $bin $M --steps 2 > $R/warm_m_$n.log 2>&1; echo "warm_m_$n rc=$? $(el)s" >> $R/times.txt; done ) &
for m in base:$B:- tail:$N:tail entry:$N:entry; do n=${m%%:*}; r=${m#*:}; bin=${r%%:*}; v=${r#*:}
  ( timeout 150 env $(envof $v) BITDECODE_PTXAS_VERBOSE=1 $bin $A --grid 1x8192,1x131072 > $R/warm_a_$n.log 2>&1; echo "warm_a_$n rc=$? $(el)s" >> $R/times.txt ) &
done
wait
pack
END=292
step() { local n=$1 lim=$2; shift 2; if [ $(el) -lt $lim ]; then timeout $(( END - $(el) )) "$@" > $R/$n.log 2>&1; echo "$n rc=$? $(el)s" >> $R/times.txt; else echo "$n skipped at $(el)s" >> $R/times.txt; fi; }
round() { for m in $2; do n=${m%%:*}; r=${m#*:}; bin=${r%%:*}; v=${r#*:}; step m_${n}_$1 $3 env $(envof $v) $bin $M --steps 32; done; pack; }
attn() { for m in base:$B:- tail:$N:tail entry:$N:entry; do n=${m%%:*}; r=${m#*:}; bin=${r%%:*}; v=${r#*:}; step a_${n}_$1 $2 env $(envof $v) $bin $A --grid 1x8192,1x32768,1x131072; done; pack; }
round 1 "$MODES" 250
attn 1 230
round 2 "elast:$N:entry:last tlast:$N:tail:last entry:$N:entry tail:$N:tail off:$N:- base:$B:-" 280
attn 2 262
pack
cat $R/times.txt $R/gpu.txt
grep -h -- '--- \(PASS\|FAIL\|SKIP\)\|^FAIL\|^ok\|panic' $R/t_*.log | grep -v '^        ---' | head -40
grep -h 'read ceiling' $R/m_base_1.log $R/a_base_1.log 2>/dev/null | head -3
for f in $R/m_*_[12].log; do echo "$(basename $f .log): $(awk '/ ctx .* ms\/step/ {printf "%s %s %s %s; ", $2, $4, $9, $NF}' $f)"; done
for f in $R/a_*_[12].log; do echo "== $(basename $f .log)"; grep -h ' us ' $f | grep 'B=1 ' | sed 's/  */ /g' | cut -c1-110; done
for f in $R/warm_a_*.log; do echo "== $f"; grep -h -A3 'decode_mma<\|decode_wgmma<' $f | grep -h 'decode_mma<\|Used\|spill' | sed 's/ptxas *//' | cut -c1-150 | head -16; done
