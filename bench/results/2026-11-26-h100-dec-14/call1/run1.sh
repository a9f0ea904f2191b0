#!/bin/bash
# s14-dec call 1: the DEC tests (v3.2's fused kernel and v2's), then bench dec (int4, int3) against
# the v3.2 base in the same run, tune dec, and the 8B step, one process per DEC setting.
D=$(cd "$(dirname "$0")" && pwd)
R=/tmp/r; rm -rf $R; mkdir -p $R/T14; cp $D/run1.sh $R/
T0=$(date +%s); END=$((T0 + 285))
tl() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/timeline.txt; }
lim() { local left=$((END - $(date +%s))); [ $left -gt $1 ] && echo $1 || echo $((left > 1 ? left : 1)); }
snap() { tar czf $OUT/results.tmp -C /tmp r && mv $OUT/results.tmp $OUT/results.tgz; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
B=$D/bitdecode; KT=$D/kernels.test; BT=$D/backend.test
export BITDECODE_DEC_RESIDUAL=device BITDECODE_CACHE_DIR=/tmp/bdc
mkdir -p /tmp/bdc
DECW="--mode fused --residual-at device --k-chunk 8 --n-tb 8 --runs 1"
MOD="--ctx 1k --kv int4 --weights int4 --no-linears --steps 16"
G='^TestGEMVQDECMatchesSerial$/'
t() { local n=$1 l=$2; shift 2; timeout $(lim $l) "$@" > $R/$n.log 2>&1; local rc=$?; tl "$n rc=$rc"; return $rc; }
t warm4 90 $B bench dec --shapes 1024x4096 --weights int4 $DECW &
t warm3 90 $B bench dec --shapes 1024x4096 --weights int3 $DECW &
t warm_model 90 $B bench model $MOD --dec-k 0 --steps 1 &
t kt_t1_int4 110 $KT -test.v -test.timeout 105s -test.run "${G}int4-resint4-N[0-9]+-K[0-9]+-T1-" &
t kt_t1_int3 110 $KT -test.v -test.timeout 105s -test.run "${G}int3-resint4-N[0-9]+-K[0-9]+-T1-" &
t kt_v2_int4 110 $KT -test.v -test.timeout 105s -test.run "${G}int4-resint4-N[0-9]+-K[0-9]+-T[2-8]-" &
t kt_v2_int3 110 $KT -test.v -test.timeout 105s -test.run "${G}int3-resint4-N[0-9]+-K[0-9]+-T[2-8]-" &
t kt_proto 110 $KT -test.v -test.timeout 105s -test.run '^(TestDECFusedProtocol|TestDECFusedLateWords|TestDECCompensateMatchesWQ|TestGEMVQMatchesReference)$' &
t bt_dec 110 $BT -test.v -test.timeout 105s -test.run '^(TestQuantLinearDEC|TestQuantLinearGroupDEC|TestModelDECMatchesCPU)$' &
wait; tl "phase 2"; snap
DECA="--shapes llama-3.1-8b --mode fused --residual-at device --k-chunk 1,4,8,64 --n-tb 8,32,64,128 --runs 20"
timeout $(lim 22) $B bench dec $DECA --weights int4 --json $R/bench_dec_int4.json > $R/bench_dec_int4.log 2>&1; tl "bench dec int4 rc=$?"; snap
timeout $(lim 22) $B bench dec $DECA --weights int3 --json $R/bench_dec_int3.json > $R/bench_dec_int3.log 2>&1; tl "bench dec int3 rc=$?"; snap
timeout $(lim 20) $B tune dec --shapes llama-3.1-8b --weights int4 --residual-at device --slowdown 5%,10% --runs 20 --out $R/T14/bitdecode.json > $R/tune8b_int4.log 2>&1; tl "tune rc=$?"; snap
for k in 0 64 tuned:5% 0 tuned:5% 64; do
  n=$(echo $k | tr ':%' '__'); i=$((i+1))
  ds=""; case $k in tuned*) ds="--dec-settings $R/T14";; esac
  timeout $(lim 10) $B bench model $MOD --dec-k $k $ds --json $R/model_${i}_$n.json > $R/model_${i}_$n.log 2>&1; tl "model $i $k rc=$?"; snap
done
tl end; snap
