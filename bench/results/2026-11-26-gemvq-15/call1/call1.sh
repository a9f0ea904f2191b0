#!/bin/bash
# Session 15 gemvq call 1: the diagnostic sweep, ncu, the v6 tests.
B=.gpu-gemvq
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv 2>&1 | tee $OUT/smi.log
# 1. timing (alone on the GPU)
timeout 120 $B/bitdecode bench gemvq --diag --json $OUT/diag.json 2>&1 | tee $OUT/diag.log
# 2. ncu: v5.1, loads, loads-tiled, v6 on gate/up S 2 and down S 8 (one launch each)
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
echo "ncu: $NCU"
M=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sector_hit_rate.pct,l1tex__t_requests_pipe_lsu_mem_global_op_ldgsts.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts.sum,sm__warps_active.avg.pct_of_peak_sustained_active,sm__cycles_active.avg,gpc__cycles_elapsed.max,smsp__inst_executed.sum,lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum,dram__cycles_active.avg.pct_of_peak_sustained_elapsed
timeout 130 $NCU --clock-control none -k regex:gemv_q5 --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section LaunchStats --section MemoryWorkloadAnalysis --metrics $M \
  $B/bitdecode bench gemvq --diag --diag-runs 1 --shapes gate/up,down --splits 2,8 > $OUT/ncu.log 2>&1
echo "ncu rc $?"; grep -c "gemv_q5" $OUT/ncu.log
# 3. the v6 tests (tile_pack == PackTiles, v6 == v5.1 bit for bit, the float64 bound)
timeout 150 $B/kernels.test -test.run 'TestGEMVQ6MatchesV5|TestPackTiles' -test.v -test.timeout 140s 2>&1 | tail -20 | tee $OUT/test.log
grep -E "x1 " $OUT/diag.log | cut -c12-
