# session 16 fusedq, call 1: tests, the GEMMQ sweep, the Linear bench (new), the B=32 step (base, new)
B=/tmp/fqbin; mkdir -p $B && tar xJf .gpu-fusedq/bin.tar.xz -C $B || exit 1
R=$(pwd)
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
(cd gpu/kernels && timeout 240 $B/kernels.test -test.run 'TestGEMMQMatchesReference|TestGEMVQTiledMatchesWQ' -test.v -test.timeout 230s > $OUT/test_kernels.log 2>&1; echo "rc $?" >> $OUT/test_kernels.log) &
(cd backend/gpu && timeout 240 $B/gpu.test -test.run 'TestQuantLinearTiled|TestQuantLinear$' -test.v -test.timeout 230s > $OUT/test_backend.log 2>&1; echo "rc $?" >> $OUT/test_backend.log) &
wait
tail -3 $OUT/test_kernels.log $OUT/test_backend.log
(cd gpu/kernels && timeout 150 $B/kernels.test -test.run '^$' -test.bench 'GEMMQ' -test.benchtime 1x -test.timeout 140s > $OUT/sweep.log 2>&1)
grep -E "ceiling|auto|fp16" $OUT/sweep.log | awk '{print $1, $3, $5}' | head -80
(cd backend/gpu && timeout 150 $B/gpu.test -test.run '^$' -test.bench 'QuantLinearLayout/(int4|fp16)/.*/T=(16|24|32|48|64|128|256)$' -test.benchtime 40x -test.timeout 140s > $OUT/layout.log 2>&1)
grep us/linear $OUT/layout.log | awk '{print $1, $3}'
for bin in bitdecode.base bitdecode; do echo "== $bin"; timeout 100 $B/$bin bench model --ctx 1k --kv int4 --weights fp16,int4 --batch 32 --steps 16 --no-linears; done > $OUT/model.log 2>&1
cat $OUT/model.log | tail -30
