#!/bin/bash
# s12-attn call 1 (2026-11-26): the GPU tests of v2.16/v3.5 (PDL for the append, pack and split
# kernels; the block-table entry beside lens; the merge's acq_rel count), then measurements:
# the B = 1 step main / new / new with BITDECODE_DECODE_PDL=off|wait, the one-sequence attention
# rows main / new / new with the old merge fence, a split sweep at 1 x 8K, ncu at 1 x 8K int4.
# Run from the repo root with .gpu-attn/ carried (bins.tar.xz: bitdecode (this branch),
# bitdecode-main (main 5a0fc94), kernels.test, gpukv.test, backend.test; gocoder.tar.xz).
set -o pipefail
TEND=${TEND:-140}
cd .gpu-attn; G=$PWD; R=$OUT/r; mkdir -p $R; cp run1.sh $R/
python3 -c "
import lzma,tarfile
for f in ('bins.tar.xz','gocoder.tar.xz'):
    tarfile.open(fileobj=lzma.open(f)).extractall('b')
"
cd b; chmod +x bitdecode* *.test
export BITDECODE_GOCODER_DIR=$PWD/gocoder-23m
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { echo "t=$SECONDS $*" >> $R/times.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $R/gpu.txt 2>&1; t start
T=70
tst() { (timeout $T ./$2 -test.v -test.timeout ${T}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) & }
tst t_ref kernels.test '^TestGPUDecodeMatchesReference$'
tst t_misc kernels.test '^(TestGridDependentKernelsWait|TestGPUDecodeOneSplitMatchesCombine)$'
tst t_gpukv gpukv.test '^(TestGPUCacheGolden|TestGPUGraphReplaySameBits|TestGPUBatchInvariantLogits|TestGPUCacheBatchInvariant)$'
tst t_backend backend.test '^(TestModelPDLSameBits|TestModelMatchesCPU)$'
wait; t tests; snap
last=0
fits() { [ $((SECONDS + last)) -lt $TEND ] || { echo "skip $1 t=$SECONDS" >> $R/skipped.txt; return 1; }; }
step() { # name binary env args...
  local n=$1 b=$2 e=$3; shift 3; fits $n || return 0
  local s=$SECONDS
  env $e timeout $((TEND + 8 - SECONDS)) ./$b "$@" --json $R/$n.json > $R/$n.md 2> $R/$n.log; echo "rc=$? t=$SECONDS env=$e" >> $R/$n.log
  last=$((SECONDS - s)); t $n; snap
}
M="bench model --ctx 32k --kv int4,int2,fp16 --batch 1 --steps 32 --no-linears"
A="bench attn --device cuda --kv int4,int4:kt128,int2,fp16 --grid 1x8192,1x32768"
step m_main bitdecode-main X=0 $M
step m_new bitdecode X=0 $M
step m_off bitdecode BITDECODE_DECODE_PDL=off $M
step a_main bitdecode-main X=0 $A
step a_new bitdecode BITDECODE_PTXAS_VERBOSE=1 $A
step a_sc bitdecode BITDECODE_DECODE_MERGE_FENCE=sc $A
S="bench attn --device cuda --kv int4,int4:kt128 --grid 1x8192"
step s_t64 bitdecode BITDECODE_DECODE_SPLITS=target:64 $S
step s_t256 bitdecode "BITDECODE_DECODE_SPLITS=target:256 BITDECODE_DECODE_MINSPLIT=256" $S
prof() { # name binary
  fits $1 || return 0
  local s=$SECONDS
  timeout $((TEND + 8 - SECONDS)) ncu --clock-control none --kernel-name regex:decode_ --launch-skip 6 --launch-count 3 \
    --metrics gpu__time_duration.sum,launch__grid_size,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__cycles_active.avg \
    ./$2 bench attn --device cuda --kv int4 --grid 1x8192 > $R/$1.txt 2>&1; echo "rc=$?" >> $R/$1.txt
  last=$((SECONDS - s)); t $1; snap
}
prof ncu_new bitdecode
step m_wait bitdecode BITDECODE_DECODE_PDL=wait $M
step m_main2 bitdecode-main X=0 $M
step m_new2 bitdecode X=0 $M
prof ncu_main bitdecode-main
t end; snap
grep -h -- '^--- FAIL\|^ok\|^FAIL\|^PASS\|rc=\|panic' $R/t_*.log | head -20
grep -h "ms/step" $R/m_*.log | cut -c1-110
grep -H "^| auto\|^| mma\|^| wgmma" $R/a_*.md $R/s_*.md | cut -c1-170
grep -h "gpu__time_duration\|launch__grid\|decode_" $R/ncu_*.txt | head -30
cat $R/times.txt $R/skipped.txt 2>/dev/null
