#!/bin/bash
# s14-dec call 2: variants of gemv_q3_dec side by side (v1: call 1's; v2: the part word peeked
# without a memory clobber; v3: v2 at 5 CTAs an SM (96 registers); d6/d5: diagnostics, the DEC CTAs
# idle and the base without the protocol, at 6/5 CTAs an SM), the rest of the DEC tests (v3), tune
# dec and the step per variant, one process per DEC setting.
D=$(cd "$(dirname "$0")" && pwd)
R=/tmp/r; rm -rf $R; mkdir -p $R/T14v2 $R/T14v3; cp $D/run2.sh $R/
T0=$(date +%s); END=$((T0 + 175))
tl() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/timeline.txt; }
lim() { local left=$((END - $(date +%s))); [ $left -gt $1 ] && echo $1 || echo $((left > 1 ? left : 1)); }
snap() { tar czf $OUT/results.tmp -C /tmp r && mv $OUT/results.tmp $OUT/results.tgz; }
B=/tmp/bin; mkdir -p $B
python3 -c "
import lzma,sys,os
for f in sys.argv[2:]:
    o=os.path.join(sys.argv[1],os.path.basename(f)[:-3]); open(o,'wb').write(lzma.open(f).read()); os.chmod(o,0o755)
" $B $D/*.xz
tl "unpacked"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
KT=$B/kernels.test; BT=$B/backend.test
export BITDECODE_DEC_RESIDUAL=device BITDECODE_CACHE_DIR=/tmp/bdc
mkdir -p /tmp/bdc
DECW="--mode fused --residual-at device --k-chunk 8 --n-tb 8 --runs 1"
MOD="--ctx 1k --kv int4 --weights int4 --no-linears --steps 16"
G='^TestGEMVQDECMatchesSerial$/'
t() { local n=$1 l=$2; shift 2; timeout $(lim $l) "$@" > $R/$n.log 2>&1; local rc=$?; tl "$n rc=$rc"; return $rc; }
for v in v1 v2 v3 d6 d5; do t warm_$v 80 $B/bitdecode-$v bench dec --shapes 1024x4096 --weights int4 $DECW & done
t warm3 80 $B/bitdecode-v3 bench dec --shapes 1024x4096 --weights int3 $DECW &
t warm_model 80 $B/bitdecode-v3 bench model $MOD --dec-k 0 --steps 1 &
t kt_a 95 $KT -test.v -test.timeout 90s -test.run "${G}int4-resint4-N(4096|1024)-K4096-T1-" &
t kt_b 95 $KT -test.v -test.timeout 90s -test.run "${G}int4-resint4-N4096-K14336-T1-" &
t kt_c 95 $KT -test.v -test.timeout 90s -test.run "${G}int4-resint4-N(14336|256|128)-K[0-9]+-T1-" &
t kt_int3 95 $KT -test.v -test.timeout 90s -test.run "${G}int3-resint4-N[0-9]+-K[0-9]+-T1-" &
t kt_v2a 95 $KT -test.v -test.timeout 90s -test.run "${G}int4-resint4-N(1024|4096|256)-K[0-9]+-T[2-8]-" &
t kt_v2b 95 $KT -test.v -test.timeout 90s -test.run "${G}int4-resint4-N(14336|384)-K[0-9]+-T[2-8]-" &
t bt_dec 95 $BT -test.v -test.timeout 90s -test.run '^(TestQuantLinearDEC|TestQuantLinearGroupDEC)$' &
wait; tl "phase 2"; snap
DECA="--shapes llama-3.1-8b --mode fused --residual-at device --k-chunk 1,8,64 --n-tb 8,32,128 --runs 20"
for v in v1 v2 v3 d6 d5 v3; do
  i=$((i+1)); timeout $(lim 12) $B/bitdecode-$v bench dec $DECA --weights int4 --json $R/bench_dec_${i}_$v.json > $R/bench_dec_${i}_$v.log 2>&1; tl "bench dec $i $v rc=$?"
done; snap
timeout $(lim 12) $B/bitdecode-v3 bench dec $DECA --weights int3 --json $R/bench_dec_int3_v3.json > $R/bench_dec_int3_v3.log 2>&1; tl "bench dec int3 v3 rc=$?"
for v in v3 v2; do
  timeout $(lim 12) $B/bitdecode-$v tune dec --shapes llama-3.1-8b --weights int4 --residual-at device --slowdown 5%,10% --runs 20 --out $R/T14$v/bitdecode.json > $R/tune_$v.log 2>&1; tl "tune $v rc=$?"
done; snap
for vk in v3:0 v3:64 v3:tuned:5% v2:64 v3:tuned:10%; do
  v=${vk%%:*}; k=${vk#*:}; i=$((i+1)); n=$(echo $k | tr ':%' '__')
  ds=""; case $k in tuned*) ds="--dec-settings $R/T14$v";; esac
  timeout $(lim 10) $B/bitdecode-$v bench model $MOD --dec-k $k $ds --json $R/model_${i}_${v}_$n.json > $R/model_${i}_${v}_$n.log 2>&1; tl "model $i $v $k rc=$?"; snap
done
tl end; snap
