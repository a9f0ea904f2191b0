#!/bin/bash
# decfix-24 call 1 (session 24): where DEC's fixed ~5 us a layer goes (o 32, down 16), and the
# first fixes. Phase 1 (parallel, untimed): the new kernels' GPU tests (swiglu_sel; the backend's
# down-list fold with gate and up apart) and NVRTC warm-ups. Phase 2 (alone, timed): the 8B step at
# 1K, int4 KV, int4 weights, B = 1, device residuals; one process a configuration, its rows
# 0, o 32, 0, down 16, 0, C: base, new, new with BITDECODE_DEC_SLIM=1; base with BITDECODE_NO_PDL=1
# (0, o 32, 0); new with BITDECODE_DEC_DIAG=norows (0, o 32, 0); ncu of the step's kernels (off and
# o 32, new binary, the last step's launches, serialized); then the three configurations again with
# the rows reversed, and new with BITDECODE_DEC_TAIL=never (0, o 32).
# Usage (device): bash .gpu-decfix/call1.sh (bins.tar.xz beside it). Results: $OUT/results.tgz.
D=$(cd "$(dirname "$0")" && pwd)
R=/tmp/r; rm -rf $R; mkdir -p $R; cp $0 $R/
T0=$(date +%s); END=$((T0 + 283))
tl() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/timeline.txt; }
lim() { local left=$((END - $(date +%s))); [ $left -gt $1 ] && echo $1 || echo $((left > 1 ? left : 1)); }
snap() { tar czf $OUT/results.tmp -C /tmp r && mv $OUT/results.tmp $OUT/results.tgz; }
B=/tmp/bin; mkdir -p $B; tar xJf $D/bins.tar.xz -C $B; chmod +x $B/*; tl unpacked
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
export BITDECODE_CACHE_DIR=/tmp/bdc; mkdir -p /tmp/bdc
export BITDECODE_DEC_RESIDUAL=device
t() { local n=$1 l=$2; shift 2; timeout $(lim $l) "$@" > $R/$n.log 2>&1; local rc=$?; tl "$n rc=$rc"; return $rc; }
MOD="--ctx 1k --kv int4 --no-linears --steps 16 --weights int4"
C=down_proj:16+v_proj:256+o_proj:32+gate_proj:32+up_proj:32
ROWS="0,o_proj:32,0,down_proj:16,0,$C"
REV="$C,0,down_proj:16,0,o_proj:32,0"
t kt 80 $B/kernels.test -test.v -test.timeout 78s -test.run '^(TestOpsGLUSel|TestOpsGLUColsSel)$' &
t bt 80 $B/gpu.test -test.v -test.timeout 78s -test.run '^(TestQ6DECDownSelect)$' &
for v in base new; do t warm_$v 80 $B/bitdecode-$v bench model $MOD --dec-k o_proj:32 --steps 1 & done
t warm_slim 80 env BITDECODE_DEC_SLIM=1 $B/bitdecode-new bench model $MOD --dec-k o_proj:32 --steps 1 &
wait; tl "phase 2"; snap
t base_1 30 $B/bitdecode-base bench model $MOD --dec-k $ROWS --json $R/base_1.json; snap
t new_1 30 $B/bitdecode-new bench model $MOD --dec-k $ROWS --json $R/new_1.json; snap
t slim_1 30 env BITDECODE_DEC_SLIM=1 $B/bitdecode-new bench model $MOD --dec-k $ROWS --json $R/slim_1.json; snap
t nopdl 20 env BITDECODE_NO_PDL=1 $B/bitdecode-base bench model $MOD --dec-k 0,o_proj:32,0 --json $R/nopdl.json; snap
t norows 20 env BITDECODE_DEC_DIAG=norows $B/bitdecode-new bench model $MOD --dec-k 0,o_proj:32,0 --json $R/norows.json; snap
if command -v ncu >/dev/null; then
  NM=gpu__time_duration.sum,launch__registers_per_thread,launch__shared_mem_per_block_dynamic,launch__shared_mem_per_block_static,launch__grid_size,launch__block_size,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem
  for k in 0 o_proj:32; do
    n=ncu_$(echo $k | tr ':' '_')
    t $n 25 ncu --graph-profiling node --cache-control none --clock-control none -k regex:'gemv_q|add_rmsnorm|f16_to_f32|swiglu|select_q6' \
      --launch-skip 880 --launch-count 300 --metrics $NM --csv $B/bitdecode-new bench model $MOD --steps 1 --dec-k $k; snap
  done
fi
t base_2 30 $B/bitdecode-base bench model $MOD --dec-k $REV --json $R/base_2.json; snap
t new_2 30 $B/bitdecode-new bench model $MOD --dec-k $REV --json $R/new_2.json; snap
t slim_2 30 env BITDECODE_DEC_SLIM=1 $B/bitdecode-new bench model $MOD --dec-k $REV --json $R/slim_2.json; snap
t never 15 env BITDECODE_DEC_TAIL=never $B/bitdecode-new bench model $MOD --dec-k 0,o_proj:32 --json $R/never.json
tl end; snap
