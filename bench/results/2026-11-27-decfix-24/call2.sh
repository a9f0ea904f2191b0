#!/bin/bash
# decfix-24 call 2 (session 24): the A/B of main (base, d57e2de) against this branch (new: swiglu_sel
# for down where gate and up run apart, and the tail form's rows loaded by the DEC warp during the
# base, decStage) in the 8B step at 1K, int4 KV, int4 weights, B = 1, device residuals; one process a
# row, base and new alternated, rows: DEC off, C (half3), o 32, down 16, k 64 everywhere; a second
# pass reversed. Phase 1 (parallel, untimed): every DEC GPU test the task names plus the new ones, and
# NVRTC warm-ups. Then new's form knobs at o 16/32/64 (BITDECODE_DEC_TAIL).
# Usage (device): bash .gpu-decfix/call2.sh (bins.tar.xz beside it). Results: $OUT/results.tgz.
D=$(cd "$(dirname "$0")" && pwd)
R=/tmp/r; rm -rf $R; mkdir -p $R; cp $0 $R/
T0=$(date +%s); END=$((T0 + 288))
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
t kt 140 $B/kernels.test -test.v -test.timeout 138s -test.run '^(TestGEMVQ6DECMatchesV61|TestGEMVQ6DECPart|TestDECSelectMatchesWQ|TestOpsGLUSel)$' &
t bt 140 $B/gpu.test -test.v -test.timeout 138s -test.run '^(TestQ6DECDownSelect|TestQ6DECNormSelect|TestQuantLinearQ6DEC|TestQ6DECOutSelect|TestDECRun|TestParseOptions)$' &
t gk 140 $B/gpukv.test -test.v -test.timeout 138s -test.run '^(TestGPUModelDECLists)$' &
for v in base new; do t warm_$v 130 $B/bitdecode-$v bench model $MOD --dec-k 0,$C --steps 1 & done
wait; tl "phase 2"; snap
i=0
for r in 0 $C o_proj:32 down_proj:16 64; do i=$((i+1))
  for v in base new; do t p1_${i}_$v 20 $B/bitdecode-$v bench model $MOD --dec-k $r --json $R/p1_${i}_$v.json; done; snap
done
for r in 64 down_proj:16 o_proj:32 $C 0; do
  for v in new base; do t p2_${i}_$v 20 $B/bitdecode-$v bench model $MOD --dec-k $r --json $R/p2_${i}_$v.json; done; snap; i=$((i-1))
done
t k_never 20 env BITDECODE_DEC_TAIL=never $B/bitdecode-new bench model $MOD --dec-k 0,o_proj:32,0,o_proj:64 --json $R/k_never.json; snap
t k_auto 20 $B/bitdecode-new bench model $MOD --dec-k 0,o_proj:16,0,o_proj:32,0,o_proj:64 --json $R/k_auto.json; snap
t k_always 20 env BITDECODE_DEC_TAIL=always $B/bitdecode-new bench model $MOD --dec-k 0,o_proj:16 --json $R/k_always.json
tl end; snap
