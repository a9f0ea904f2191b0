#!/bin/bash
# s29-prefill call 4: bitdecode run's prefill of the 31,993-token prompt,
# main (0d125d16) beside prefill.cu v4, fp16 and int4 KV (a warm-up run of
# each binary and KV first, then two alternated repetitions), on one H100;
# then ncu's view of the fp16 chunk at 32K keys (v4; v4 at MT = 1, KS = 1).
exec > >(tee -a $OUT/call.log) 2>&1
date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
R=$PWD; P=$R/.gpu-pf29; W=/tmp/w; mkdir -p $W
for f in kernels.test bitdecode bitdecode-main; do xz -dc $P/$f.xz > $W/$f; chmod +x $W/$f; done
export BITDECODE_CACHE_DIR=/tmp/bdc
python3 $P/gen_st.py /tmp/m8b $P/tokdir > $OUT/gen.log 2>&1; echo "gen rc $? at $SECONDS s"
head -c 2500 $P/p32000.txt > $W/pwarm.txt
run() { # binary kv prompt
  echo -n "$1 $2 $(basename $3): "; timeout 60 $W/$1 run --model /tmp/m8b --device cuda --kv $2 --max-tokens 1 --temperature 0 --prompt-file $3 2>&1 >/dev/null | grep -o "[0-9]* prompt tokens in [0-9.]*m*s ([0-9]* tok/s)\|rror.*"
}
cd $R
{ for b in bitdecode-main bitdecode; do for kv in fp16 int4; do run $b $kv $W/pwarm.txt; done; done
  for rep in 1 2; do for kv in fp16 int4; do for b in bitdecode-main bitdecode; do
    [ $SECONDS -lt 330 ] && run $b $kv $P/p32000.txt
  done; done; done
} 2>&1 | tee $OUT/bench-run.txt
echo "runs done at $SECONDS s"
cd $R/gpu/kernels
B='-test.run ^$ -test.bench PrefillAttention -test.benchtime 1x'
export BITDECODE_BENCH_PREFILL_CASES=fp16/128/512/32768
NCU="ncu --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section LaunchStats --section MemoryWorkloadAnalysis -k regex:prefill_fa --launch-count 1"
[ $SECONDS -lt 360 ] && timeout 50 $NCU $W/kernels.test $B > $OUT/ncu-v4.txt 2>&1
[ $SECONDS -lt 410 ] && BITDECODE_PREFILL_MT=1 BITDECODE_PREFILL_KS=1 timeout 45 $NCU $W/kernels.test $B > $OUT/ncu-mt1ks1.txt 2>&1
grep -h "prefill_fa\|Duration\|Compute (SM) Throughput\|Achieved Occupancy\|Warp Cycles Per Issued\|Issued Warp Per\|No Eligible\|Registers Per\|Shared Memory Throughput\|Stall" $OUT/ncu-*.txt | cut -c1-160 | head -40
echo "end at $SECONDS s"
