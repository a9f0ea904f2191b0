#!/bin/bash
# v13 call 2 (s9-lin, 2026-11-25): v13b, the narrow kernel's weights asked of L2 ahead. One call on
# nvidia-h100-x1, from the repo root with .gpu-lin/ carried (bundle.tar.xz: main-bitdecode = main
# b76b90f, bitdecode = s9-lin v13b (prefetch 2), bitdecode-p1 / -p4 = the same code with
# linearPrefetch 1 / 4, bitdecode-ring = v13a (call 1's bitdecode), the test binaries from v13b).
set -o pipefail
T0=$(date +%s)
cd .gpu-lin; G=$PWD; R=$OUT/r; mkdir -p $R; cp run2.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x main-bitdecode bitdecode bitdecode-* *.test
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
el() { echo "$* $(( $(date +%s) - T0 )) s" >> $R/times.txt; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; } > $R/times.txt 2>&1; el extracted
T=80
tst() { # name binary regexp
  (timeout $T ./$2 -test.v -test.timeout ${T}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) &
}
tst kernels kernels.test '^(TestLinear.*|TestGridDependentKernelsWait|TestProgramsShareTheHeader|TestHeaderConstantsMatchGo)$'
tst backend backend.test '^(TestLinear|TestLinearDeterministic|TestLinearGroup|TestLinearGraphReplay|TestBatchInvariantLinear)$'
tst gpukv gpukv.test '^(TestGPUGraphReplaySameBits|TestGPUBatchInvariant.*|TestGPUCacheBatchInvariant)$'
wait; el tests; snap
bin() { case $1 in main) echo ./main-bitdecode;; new) echo ./bitdecode;; *) echo ./bitdecode-$1;; esac; }
model() { # name kvs round
  timeout 40 $(bin $1) bench model --ctx 32k --kv $2 --batch max --steps 32 --no-linears --json $R/model_$1_$3.json > $R/model_$1_$3.log 2>&1; echo "rc=$?" >> $R/model_$1_$3.log
  el model $1 $3; snap
}
gemv() { # name rows
  timeout 60 $(bin $1) bench gemv --rows $2 > $R/gemv_$1.log 2>&1; echo "rc=$?" >> $R/gemv_$1.log
  el gemv $1; snap
}
model main fp16,int4,int2 1; model new fp16,int4,int2 1; model p1 fp16 1; model p4 fp16 1
gemv main 15; gemv new 15; gemv p1 15; gemv p4 15
model p4 fp16 2; model p1 fp16 2; model new fp16,int4,int2 2; model main fp16,int4,int2 2
grep -h "^--- FAIL\|^FAIL\|^ok\|^PASS\|rc=\|panic" $R/kernels.log $R/backend.log $R/gpukv.log
grep -h "T=15 \|rc=" $R/gemv_*.log
grep -h "ms/step\|rc=" $R/model_*.log | head -40
# Counters: gate|up grouped (launches 92-114 of linear_f16 in bench gemv --rows 15) and down (115-137).
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
M=gpu__time_duration.sum,launch__grid_size,dram__bytes_read.sum,lts__t_bytes.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sector_op_read_hit_rate.pct,l1tex__t_sector_hit_rate.pct,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_hit.sum,sm__warps_active.avg.pct_of_peak_sustained_active
for b in main ring new; do
  for sk in 97 120; do
    timeout 40 $NCU --clock-control none -k regex:linear_f16 --launch-skip $sk --launch-count 1 --metrics $M --csv $(bin $b) bench gemv --rows 15 > $R/ncu_${b}_$sk.log 2>&1; echo "rc=$?" >> $R/ncu_${b}_$sk.log
    el ncu $b $sk; snap
  done
done
grep -h "dram__bytes\|hit_rate\|duration\|rc=" $R/ncu_*.log | cut -c1-300 | head -60
cat $R/times.txt
