#!/bin/bash
# decalloc-23 call 1 (session 23): DEC by projection on the GPU.
# Phase 1 (parallel, untimed): the DEC GPU tests (LaunchPart, the joined groups with parts
# without DEC, the model's lists) and NVRTC warm-ups of both binaries.
# Phase 2 (alone, timed): bench dec --v6 (int4; each part's k: o, v in q|k|v, down, gate in
# gate|up, and the whole joined shapes); the 8B step at 1K, int4 KV, int4 weights, device
# residuals: new [off, A, B, C, k64] x2 around base [off, k64]; then the same with int3
# weights; then bench dec --v6 int3.
# A = down 32 + v 256 + o 64 (half3), B = A + gate 64, C = down 16 + v 256 + o 32 + gate 32 + up 32.
# Usage (device): bash .gpu-decalloc/call1.sh (bins.tar.xz beside it). Results: $OUT/results.tgz.
D=$(cd "$(dirname "$0")" && pwd)
R=/tmp/r; rm -rf $R; mkdir -p $R; cp $0 $R/
T0=$(date +%s); END=$((T0 + 285))
tl() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/timeline.txt; }
lim() { local left=$((END - $(date +%s))); [ $left -gt $1 ] && echo $1 || echo $((left > 1 ? left : 1)); }
snap() { tar czf $OUT/results.tmp -C /tmp r && mv $OUT/results.tmp $OUT/results.tgz; }
B=/tmp/bin; mkdir -p $B; tar xJf $D/bins.tar.xz -C $B; chmod +x $B/*; tl unpacked
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
export BITDECODE_CACHE_DIR=/tmp/bdc; mkdir -p /tmp/bdc
export BITDECODE_DEC_RESIDUAL=device
t() { local n=$1 l=$2; shift 2; timeout $(lim $l) "$@" > $R/$n.log 2>&1; local rc=$?; tl "$n rc=$rc"; return $rc; }
MOD="--ctx 1k --kv int4 --no-linears --steps 16"
A=down_proj:32+v_proj:256+o_proj:64
BB=down_proj:32+v_proj:256+o_proj:64+gate_proj:64
C=down_proj:16+v_proj:256+o_proj:32+gate_proj:32+up_proj:32
SH="4096x4096,6144x4096@5120+1024,6144x4096,1024x4096,4096x14336,28672x4096@0+14336,28672x4096"
t kt 170 $B/kernels.test -test.v -test.timeout 165s -test.run '^(TestGEMVQ6DECPart|TestGEMVQ6DECMatchesV61|TestDECSelectMatchesWQ)$' &
t bt 170 $B/backend.test -test.v -test.timeout 165s -test.run '^(TestQ6DECNormSelect|TestQuantLinearQ6DEC|TestQ6DECOutSelect|TestQ6DECDownSelect|TestDECRun)$' &
t gk 170 $B/gpukv.test -test.v -test.timeout 165s -test.run '^(TestGPUModelDECLists)$' &
for v in base new; do t warm_$v 160 $B/bitdecode-$v bench model $MOD --weights int4 --dec-k 64 --steps 1 & done
wait; tl "phase 2"; snap
t dec4 45 $B/bitdecode-new bench dec --v6 --weights int4 --shapes $SH --k-chunk 16,32,64,256 --runs 30; snap
t step4_new_1 45 $B/bitdecode-new bench model $MOD --weights int4 --dec-k 0,$A,$BB,$C,64 --json $R/step4_new_1.json; snap
t step4_base_1 25 $B/bitdecode-base bench model $MOD --weights int4 --dec-k 0,64 --json $R/step4_base_1.json; snap
t step4_new_2 45 $B/bitdecode-new bench model $MOD --weights int4 --dec-k 64,$C,$BB,$A,0 --json $R/step4_new_2.json; snap
t step3_new_1 45 $B/bitdecode-new bench model $MOD --weights int3 --dec-k 0,$A,$BB,$C,64,0,$A --json $R/step3_new_1.json; snap
t dec3 30 $B/bitdecode-new bench dec --v6 --weights int3 --shapes $SH --k-chunk 16,32,64,256 --runs 30
tl end; snap
