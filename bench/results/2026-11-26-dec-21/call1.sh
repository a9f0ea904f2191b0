#!/bin/bash
# dec-21 call 1 (session 21): where DEC's list producers' ~1 us goes.
# Background from t=0: backend and gpukv GPU tests of the lists (NVRTC compiles on the CPU first).
# Foreground: kernels' list tests; BenchmarkOpsSel base (main 5c86472) and new (ballot placement)
# alternated; BenchmarkOpsSelDiag (selectChunk's knobs and diagnostics) twice; ncu of each
# producer beside its plain kernel (k 8; stall sampling per SASS line).
# Usage (device): bash .gpu-dec/call1.sh  (bins/ beside it). Everything lands in $OUT/results.tgz.
D=$(cd "$(dirname "$0")" && pwd)
R=/tmp/r; rm -rf $R; mkdir -p $R; cp $D/call1.sh $R/
T0=$(date +%s); END=$((T0 + 285))
tl() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/timeline.txt; }
lim() { local left=$((END - $(date +%s))); [ $left -gt $1 ] && echo $1 || echo $((left > 1 ? left : 1)); }
snap() { tar czf $OUT/results.tmp -C /tmp r && mv $OUT/results.tmp $OUT/results.tgz; }
B=/tmp/bin; mkdir -p $B; tar xJf $D/bins.tar.xz -C $B; chmod +x $B/*; tl unpacked
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
export BITDECODE_CACHE_DIR=/tmp/bdc; mkdir -p /tmp/bdc
t() { local n=$1 l=$2; shift 2; timeout $(lim $l) "$@" > $R/$n.log 2>&1; local rc=$?; tl "$n rc=$rc"; return $rc; }
t bt_sel 250 $B/backend.test -test.v -test.timeout 245s -test.run '^(TestQ6DECNormSelect|TestQ6DECOutSelect|TestQ6DECDownSelect)$' &
t gk_model 250 $B/gpukv.test -test.v -test.timeout 245s -test.run '^(TestGPUModelDECLists)$' &
t kt_sel 120 $B/kernels.test -test.v -test.timeout 115s -test.run '^(TestOpsAddRMSNormSel|TestOpsOutSel|TestOpsGLUColsSel)$'
snap
for rep in 1 2; do for v in base new; do
  kt=$B/kernels.test; [ $v = base ] && kt=$B/kernels-base.test
  t kb_${v}_$rep 40 $kt -test.run '^$' -test.bench '^BenchmarkOpsSel$' -test.benchtime 500x -test.count 2
done; done; snap
t kd_1 90 $B/kernels.test -test.run '^$' -test.bench OpsSelDiag -test.benchtime 500x
t kd_2 40 $B/kernels.test -test.run '^$' -test.bench OpsSelDiag -test.benchtime 500x; snap
if command -v ncu >/dev/null; then
  for spec in norm/sel-k8:add_rmsnorm_cluster_sel out/sel-k8:f16_to_f32_hadamard_sel glu/sel-k8:swiglu_cols_sel \
              norm/plain:add_rmsnorm_cluster "out/plain:f16_to_f32_hadamard(_warp)?" glu/plain:swiglu_cols; do
    sub=${spec%%:*}; k=${spec##*:}; n=ncu_$(echo $sub | tr '/-' '__')
    [ $((END - $(date +%s))) -lt 25 ] && break
    t $n 40 ncu --clock-control none --warp-sampling-interval 0 -k regex:"^$k\$" --launch-skip 64 --launch-count 3 \
      --section SpeedOfLight --section LaunchStats --section WarpStateStats --section SchedulerStats \
      --section SourceCounters --section MemoryWorkloadAnalysis_Tables -o $R/$n -f \
      $B/kernels.test -test.run '^$' -test.bench "^BenchmarkOpsSel\$/^${sub%%/*}\$/^${sub##*/}\$" -test.benchtime 1x
    ncu -i $R/$n.ncu-rep --page details > $R/${n}_details.txt 2>&1
    case $sub in *sel*) ncu -i $R/$n.ncu-rep --page source --csv --print-source sass > $R/${n}_sass.csv 2>&1;; esac
    snap
  done
fi
wait; tl end
rm -f $R/*.ncu-rep; snap
