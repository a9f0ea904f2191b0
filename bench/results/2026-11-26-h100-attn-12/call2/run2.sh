#!/bin/bash
# s12-attn call 2 (2026-11-26): phase A, in parallel: the decode reference tests of this branch
# (TestGPUDecodeMatchesReference mma and wgmma, TestGPUDecodeLong) beside untimed warm-up runs
# of both binaries (their kernels compiled into the shared CUBIN cache). Phase B, timed, one
# process at a time: main (5a0fc94) and this branch alternated twice, the attention grid and
# the B = 1 step (and the branch with BITDECODE_DECODE_PDL=off in the step); then the branch
# with the old merge fence, a split sweep at 1 x 8K and ncu at 1 x 8K int4.
# Run from the repo root with .gpu-attn/ carried (bins.tar.xz as in call 1).
set -o pipefail
TEND=${TEND:-190}
cd .gpu-attn; G=$PWD; R=$OUT/r; mkdir -p $R; cp run2.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bins.tar.xz')).extractall('b')
"
cd b; chmod +x bitdecode* *.test
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { echo "t=$SECONDS $*" >> $R/times.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $R/gpu.txt 2>&1; t start
A="bench attn --device cuda --kv fp16,int4,int4:kt128,int2,k4v2 --grid 1x8192,1x32768,1x131072,128x8192"
M="bench model --ctx 32k,128k --kv fp16,int4,int2 --batch 1 --steps 32 --no-linears"
T=92
tst() { (timeout $T ./$2 -test.v -test.timeout ${T}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) & }
tst t_mma kernels.test '^TestGPUDecodeMatchesReference$/^mma$'
tst t_wgmma kernels.test '^TestGPUDecodeMatchesReference$/^wgmma$'
tst t_long kernels.test '^TestGPUDecodeLong$'
warm() { # binary [sc]: untimed runs that compile its kernels into the cache
  (timeout 60 ./$1 $A > /dev/null 2>&1; timeout 15 ./$1 bench model --ctx 32k --kv fp16,int4,int2 --batch 1 --steps 2 --no-linears > /dev/null 2>&1
  [ -n "$2" ] && timeout 15 env BITDECODE_DECODE_MERGE_FENCE=sc ./$1 bench attn --device cuda --kv int4,int4:kt128 --grid 1x8192 > /dev/null 2>&1
  echo "t=$SECONDS warm $1 done" >> $R/times.txt) &
}
warm bitdecode-main
warm bitdecode sc
wait; t phaseA; snap
last=0
fits() { [ $((SECONDS + last)) -lt $TEND ] || { echo "skip $1 t=$SECONDS" >> $R/skipped.txt; return 1; }; }
step() { # name binary env args...
  local n=$1 b=$2 e=$3; shift 3; fits $n || return 0
  local s=$SECONDS
  env $e timeout $((TEND + 8 - SECONDS)) ./$b "$@" --json $R/$n.json > $R/$n.md 2> $R/$n.log; echo "rc=$? t=$SECONDS env=$e" >> $R/$n.log
  last=$((SECONDS - s)); t $n; snap
}
for i in 1 2; do
  step m_main$i bitdecode-main X=0 $M; step m_new$i bitdecode X=0 $M; step m_off$i bitdecode BITDECODE_DECODE_PDL=off $M
done
for i in 1 2; do step a_main$i bitdecode-main X=0 $A; step a_new$i bitdecode X=0 $A; done
S="bench attn --device cuda --kv int4,int4:kt128 --grid 1x8192"
step a_sc bitdecode BITDECODE_DECODE_MERGE_FENCE=sc $S
step a_rel bitdecode X=0 $S
step s_t64 bitdecode BITDECODE_DECODE_SPLITS=target:64 $S
step s_t256 bitdecode "BITDECODE_DECODE_SPLITS=target:256 BITDECODE_DECODE_MINSPLIT=256" $S
prof() { # name env: ncu's kernel times of this branch at 1 x 8K int4
  fits $1 || return 0
  local s=$SECONDS
  env $2 timeout $((TEND + 8 - SECONDS)) ncu --clock-control none --kernel-name regex:decode_ --launch-skip 6 --launch-count 4 \
    --metrics gpu__time_duration.sum,launch__grid_size,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed \
    ./bitdecode bench attn --device cuda --kv int4 --grid 1x8192 > $R/$1.txt 2>&1; echo "rc=$?" >> $R/$1.txt
  last=$((SECONDS - s)); t $1; snap
}
prof ncu_new X=0
prof ncu_nofuse BITDECODE_DECODE_FUSE=0
t end; snap
grep -h -- '^--- FAIL\|^ok\|^FAIL\|^PASS\|rc=\|panic' $R/t_*.log | head -20
grep -h "ms/step" $R/m_*.log | cut -c1-100
grep -H "^| auto" $R/a_*.md $R/s_*.md | cut -c1-150 | head -60
grep -h "gpu__time_duration\|decode_" $R/ncu_*.txt | head -20
cat $R/times.txt $R/skipped.txt 2>/dev/null
