#!/bin/bash
# s10-dec call 1: DEC v6.1 (v6 with the protocol's loads strong, so add_part's wait survives ptxas)
# verified, the unfixed v6 shown failing on the same machine, then the A/B against main's binary (v5).
# Phase 1 (parallel): compiles (warm-ups) and every DEC test, plus the unfixed binary's failing runs.
# Phase 2 (alone on the GPU): bench dec v6.1 / main / v6.1 / main, tune dec, bench model v6.1 / main.
D=$(cd "$(dirname "$0")" && pwd)
R=$OUT/r; mkdir -p $R/T4; cp $D/run.sh $R/
T0=$(date +%s); END=$((T0 + 175))
tl() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/timeline.txt; }
lim() { local left=$((END - $(date +%s))); [ $left -gt $1 ] && echo $1 || echo $((left > 1 ? left : 1)); }
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
for f in $D/*.xz; do python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" $f ${f%.xz} && chmod +x ${f%.xz}; done
tl unpacked
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
B=$D/bitdecode; OLD=$D/bitdecode-main; KT=$D/kernels.test; K6=$D/kernels-v6.test; BT=$D/backend.test
export BITDECODE_DEC_RESIDUAL=device
DECW="--mode fused --residual-at device --k-chunk 8 --n-tb 8 --runs 1"
DECA="--shapes llama-3.1-8b --mode fused --residual-at device --k-chunk 1,8,64 --n-tb 8,32,64,128 --runs 20"
MOD="--ctx 1k --kv int4 --weights int4 --no-linears --steps 16"
G='^TestGEMVQDECMatchesSerial$/'
F='int4-resint4-N4096-K4096-T1-k8-ntb8-p0'
t() { local n=$1; shift; timeout $(lim ${L:-115}) "$@" > $R/$n.log 2>&1; tl "$n rc=$?"; }
# Phase 1.
( t warm $B bench dec --shapes 1024x4096 --weights int4 $DECW ) &
( t warm_main $OLD bench dec --shapes 1024x4096 --weights int4 $DECW ) &
( t warm_model $B bench model $MOD --dec-k 0 --steps 1 ) &
( t kernels_failing $KT -test.v -test.run "${G}${F}" -test.count=5 ) &
( t kernels_n4096 $KT -test.v -test.run "${G}-N4096-K(14336|4096-T2)" ) &
( t kernels_n14336_t1 $KT -test.v -test.run "${G}N14336-K4096-T1" ) &
( t kernels_n14336_t23 $KT -test.v -test.run "${G}N14336-K4096-T[23]" ) &
( t kernels_small $KT -test.v -test.run "${G}-N(1024|256|384)-" ) &
( t kernels_protocol $KT -test.v -test.run '^(TestDECFusedProtocol|TestDECFusedLateWords)$' -test.count=3 ) &
( t backend $BT -test.v -test.run '^(TestQuantLinearDEC|TestQuantLinearGroupDEC)$' ) &
( t unfixed_late $K6 -test.v -test.run '^TestDECFusedLateWords$' ) &
( t unfixed_gemvq $K6 -test.v -test.run "${G}${F}" -test.count=3 ) &
( L=90 t memcheck compute-sanitizer --tool memcheck $KT -test.v -test.run "${G}${F}" ) &
( L=90 t racecheck_late compute-sanitizer --tool racecheck $KT -test.v -test.run '^TestDECFusedLateWords$/.*-N512-' ) &
wait; snap
# Phase 2: timings, one at a time.
for i in 1 2; do
  timeout $(lim 15) $B bench dec $DECA --json $R/bench_dec_v61_$i.json > $R/bench_dec_v61_$i.log 2>&1; tl "bench dec v6.1 $i rc=$?"
  timeout $(lim 15) $OLD bench dec $DECA --json $R/bench_dec_main_$i.json > $R/bench_dec_main_$i.log 2>&1; tl "bench dec main $i rc=$?"
done; snap
timeout $(lim 25) $B tune dec --shapes llama-3.1-8b --weights int4 --residual-at device --slowdown 5%,10% --runs 20 --out $R/T4/bitdecode.json > $R/tune8b_int4.log 2>&1; tl "tune rc=$?"; snap
timeout $(lim 25) $B bench model $MOD --dec-k 0,64,tuned:5%,0 --dec-settings $R/T4 --json $R/model_v61.json > $R/model_v61.log 2>&1; tl "model v6.1 rc=$?"
timeout $(lim 20) $OLD bench model $MOD --dec-k 0,64,0 --json $R/model_main.json > $R/model_main.log 2>&1; tl "model main rc=$?"
tl end; snap
