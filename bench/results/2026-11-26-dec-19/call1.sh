#!/bin/bash
# s19-dec call 1: tests of the q6 route (kernels, backend) in parallel with the NVRTC warm-ups,
# then the A/B step (main bb599c2 = base, s19-dec = new; alternated), bench dec --v6, bench dec
# (fused, device residual) base and new, tune dec new at 5%/10% and the tuned step.
D=$(cd "$(dirname "$0")" && pwd)
R=/tmp/r; rm -rf $R; mkdir -p $R/tune4 $R/tune3; cp $D/call1.sh $R/
T0=$(date +%s); END=$((T0 + 520))
tl() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/timeline.txt; }
lim() { local left=$((END - $(date +%s))); [ $left -gt $1 ] && echo $1 || echo $((left > 1 ? left : 1)); }
snap() { tar czf $OUT/results.tmp -C /tmp r && mv $OUT/results.tmp $OUT/results.tgz; }
B=/tmp/bin; mkdir -p $B; tar xJf $D/bins.tar.xz -C $B; chmod +x $B/*
tl "unpacked"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
export BITDECODE_CACHE_DIR=/tmp/bdc; mkdir -p /tmp/bdc
t() { local n=$1 l=$2; shift 2; timeout $(lim $l) "$@" > $R/$n.log 2>&1; local rc=$?; tl "$n rc=$rc"; return $rc; }
MOD="--ctx 1k --kv int4 --no-linears --steps 16"
# phase 1: tests and warm-ups in parallel
t kt_q6 240 $B/kernels.test -test.v -test.timeout 230s -test.run '^(TestGEMVQ6DECMatchesV61|TestDECSelectMatchesWQ|TestDECCompensateMatchesWQ)$' &
t bt_q6 240 $B/backend.test -test.v -test.timeout 230s -test.run '^TestQuantLinearQ6DEC$' &
t bt_dec 240 $B/backend.test -test.v -test.timeout 230s -test.run '^(TestQuantLinearDEC|TestQuantLinearGroupDEC)$' &
for v in base new; do for w in int4 int3; do
  BITDECODE_DEC_RESIDUAL=device t warm_${v}_$w 200 $B/bitdecode-$v bench model $MOD --weights $w --dec-k 8 --steps 1 &
done; done
BITDECODE_DEC_RESIDUAL=device t warm_v6 200 $B/bitdecode-new bench dec --v6 --shapes 1024x4096 --weights int4 --k-chunk 8 --runs 1 &
wait; tl "phase 2"; snap
export BITDECODE_DEC_RESIDUAL=device
# the step, A/B alternated, one process a row
for rep in 1 2; do for w in int4 int3; do for k in 0 8 64; do for v in base new; do
  t model_${w}_k${k}_${v}_$rep 40 $B/bitdecode-$v bench model $MOD --weights $w --dec-k $k --json $R/model_${w}_k${k}_${v}_$rep.json
done; done; done; snap; done
t v6 90 $B/bitdecode-new bench dec --v6 --weights int4,int3; snap
DECA="--shapes llama-3.1-8b --mode fused --residual-at device --k-chunk 1,8,16,32,64 --n-tb 8,32,128 --runs 20"
for w in int4 int3; do for v in new base; do
  t dec_${w}_$v 60 $B/bitdecode-$v bench dec $DECA --weights $w --json $R/dec_${w}_$v.json
done; done; snap
for w in 4 3; do
  t tune_int$w 90 $B/bitdecode-new tune dec --shapes llama-3.1-8b --weights int$w --residual-at device --slowdown 5%,10% --runs 20 --out $R/tune$w/bitdecode.json
done; snap
for w in 4 3; do for k in tuned:5% tuned:10%; do n=$(echo $k | tr ':%' '__')
  t model_int${w}_${n}_new 40 $B/bitdecode-new bench model $MOD --weights int$w --dec-k $k --dec-settings $R/tune$w --json $R/model_int${w}_${n}.json
done; done
tl end; snap
