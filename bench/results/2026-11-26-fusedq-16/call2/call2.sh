# session 16 fusedq, call 2: tests of the changed code, the full sweep (default build), the variants
# (volatile mma, loads only, math only), ncu of two launches, the B=32 step (new)
B=/tmp/fqbin; mkdir -p $B && tar xJf .gpu-fusedq/bin2.tar.xz -C $B || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
(cd gpu/kernels && timeout 200 $B/kernels.test -test.run 'TestGEMMQMatchesReference' -test.v -test.timeout 190s > $OUT/test_kernels.log 2>&1; echo "rc $?" >> $OUT/test_kernels.log) &
(cd backend/gpu && timeout 200 $B/gpu.test -test.run 'TestQuantLinearTiled|TestQuantLinear$' -test.v -test.timeout 190s > $OUT/test_backend.log 2>&1; echo "rc $?" >> $OUT/test_backend.log) &
wait
tail -n 3 $OUT/test_kernels.log $OUT/test_backend.log
cd gpu/kernels
timeout 150 $B/kernels.test -test.run '^$' -test.bench 'GEMMQ/int./[^/]*/T=[0-9]*/default/' -test.benchtime 1x -test.timeout 140s > $OUT/sweep.log 2>&1
timeout 120 $B/kernels.test -test.run '^$' -test.bench 'GEMMQ/int4/(14336x4096|4096x14336|4096x4096)/T=(32|64|128)/(volatile|loads|math)/c[0-6]-(auto|s1)$' -test.benchtime 1x -test.timeout 110s > $OUT/variants.log 2>&1
grep -E "default/auto|variants" $OUT/sweep.log | awk '{print $1, $3, $4, $5, $6, $7, $8, $9, $10}' | head -40
NCU="ncu --clock-control none --kernel-name-base mangled -k regex:gemm_qILi4 --launch-skip 5 --launch-count 1 --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section Occupancy --section LaunchStats"
(timeout 80 $NCU $B/kernels.test -test.run '^$' -test.bench 'GEMMQ/int4/14336x4096/T=32/default/c0-s2$' -test.benchtime 1x; timeout 80 $NCU $B/kernels.test -test.run '^$' -test.bench 'GEMMQ/int4/14336x4096/T=128/default/c2-s1$' -test.benchtime 1x) > $OUT/ncu.log 2>&1
grep -E "Duration|Issue Slots Busy|Warp Cycles Per Issued|Stall|Compute \(SM\) Throughput|Memory Throughput|No Eligible" $OUT/ncu.log | head -40
cd ../..
timeout 100 $B/bitdecode bench model --ctx 1k --kv int4 --weights int4 --batch 32 --steps 16 --no-linears > $OUT/model.log 2>&1
tail -n 4 $OUT/model.log
