# session 16 fusedq, call 3 (final): tests; the kernel sweep (cp.async and bulk rings) and diagnostics;
# BenchmarkQuantLinearLayout base/new alternated; the decode step base/new/new+bulk at B = 16, 32, 64
B=/tmp/fqbin; mkdir -p $B && tar xJf .gpu-fusedq/bin3.tar.xz -C $B || exit 1
R=$(pwd); LO=$OUT/layout.log
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
(cd gpu/kernels && timeout 220 $B/kernels.test -test.run 'TestGEMMQMatchesReference|TestGEMVQTiledMatchesWQ' -test.v -test.timeout 210s > $OUT/tests.log 2>&1; echo "kernels rc $?" >> $OUT/tests.log) &
(cd backend/gpu && timeout 220 $B/gpu.test -test.run 'TestQuantLinearTiled|TestQuantLinear$' -test.v -test.timeout 210s > $OUT/tests_backend.log 2>&1; echo "backend rc $?" >> $OUT/tests_backend.log) &
wait
grep -E "^(--- |ok|FAIL|PASS)|rc " $OUT/tests.log $OUT/tests_backend.log
cd gpu/kernels
timeout 150 $B/kernels.test -test.run '^$' -test.bench 'GEMMQ/(int.|fp16)/[^/]*/T=[0-9]*/(default|bulk)/' -test.benchtime 1x -test.timeout 140s > $OUT/sweep.log 2>&1
timeout 90 $B/kernels.test -test.run '^$' -test.bench 'GEMMQ/int4/(14336x4096|4096x4096)/T=(32|64|128)/(bulkloads|loads|math)/c[0-7]-(auto|s1)$' -test.benchtime 1x -test.timeout 80s > $OUT/diag.log 2>&1
grep -E "/(default|bulk)/auto" $OUT/sweep.log | awk '{print $1, $(NF-1), $NF}'
cd $R/backend/gpu
timeout 90 $B/gpu.test.base -test.run '^$' -test.bench 'QuantLinearLayout/int4/.*/T=(16|32|64|128|256)/' -test.benchtime 0.5s -test.timeout 80s 2>&1 | sed 's/^/base1 /' >> $LO
timeout 120 $B/gpu.test -test.run '^$' -test.bench 'QuantLinearLayout/(int4|fp16)/.*/T=(16|24|32|48|64|128|256)$' -test.benchtime 0.5s -test.timeout 110s 2>&1 | sed 's/^/new1 /' >> $LO
timeout 90 $B/gpu.test.base -test.run '^$' -test.bench 'QuantLinearLayout/int4/.*/T=(32|64|128)/' -test.benchtime 0.5s -test.timeout 80s 2>&1 | sed 's/^/base2 /' >> $LO
timeout 90 $B/gpu.test -test.run '^$' -test.bench 'QuantLinearLayout/int4/.*/T=(32|64|128)/' -test.benchtime 0.5s -test.timeout 80s 2>&1 | sed 's/^/new2 /' >> $LO
grep us/linear $LO | awk '{print $1, $2, $4}'
cd $R
for b in 16 32 64; do
  echo "== base B=$b"; timeout 60 $B/bitdecode.base bench model --ctx 1k --kv int4 --weights fp16,int4 --batch $b --steps 16 --no-linears
  echo "== new B=$b"; timeout 60 $B/bitdecode bench model --ctx 1k --kv int4 --weights int4 --batch $b --steps 16 --no-linears
  echo "== new+bulk B=$b"; BITDECODE_GEMMQ_BULK=1 timeout 60 $B/bitdecode bench model --ctx 1k --kv int4 --weights int4 --batch $b --steps 16 --no-linears
done > $OUT/model.log 2>&1
grep -E "^==|^\| (fp16|int4)" $OUT/model.log
