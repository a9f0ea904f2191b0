#!/bin/bash
# moeq call 2 (session 19): tests with packed experts on by default and gate|up
# in one launch; A/B of the fused launch (bd-b) against call 1's two launches
# (bd-a) at T = 1, alternated A B A B; then bitdecode bench moe.
D=$(cd "$(dirname "$0")" && pwd); tar xJf $D/bins.tar.xz -C $D
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee $OUT/gpu.txt
(cd backend/gpu && timeout 200 $D/gpu.test -test.run 'TestMixQuantExperts$|TestMixExperts$|TestParseOptions' -test.v -test.timeout 195s > $OUT/backend.log 2>&1; echo "rc $?" >> $OUT/backend.log) &
(cd kvcache/gpukv && timeout 200 $D/gpukv.test -test.run 'TestGPUMoEQuantizedExperts|TestGPUMoEGraphReplaySameBits|TestGPUMoEGroupedPrefill' -test.v -test.timeout 195s > $OUT/gpukv.log 2>&1; echo "rc $?" >> $OUT/gpukv.log) &
wait
grep -E '^(\s*--- |PASS|FAIL|ok|rc )' $OUT/backend.log | head -40
grep -E '^(\s*--- |PASS|FAIL|ok|rc )|graphs on' $OUT/gpukv.log | head -40
mkdir -p $OUT/ab
for r in 1 2; do for v in a b; do
  echo "== run $r bd-$v" | tee -a $OUT/ab/ab.log
  timeout 120 $D/bd-$v bench moe --tokens 1 --weights int4 --paths device --json $OUT/ab/ab-$v$r.json 2>&1 | tee -a $OUT/ab/ab.log | grep -E 'T +1 device|ceiling'
done; done
tar cf $OUT/ab.tar -C $OUT ab && rm -r $OUT/ab
timeout 200 $D/bd-b bench moe --tokens 1,4,8,16,64,256 --weights fp16,int4 --json $OUT/bench.json > $OUT/bench.log 2>&1; echo "rc $?" >> $OUT/bench.log
timeout 90 $D/bd-b bench moe --tokens 1,8 --weights int8,int3 --json $OUT/bench2.json > $OUT/bench2.log 2>&1; echo "rc $?" >> $OUT/bench2.log
sed -n '/^Mixture/,$p' $OUT/bench.log; tail -3 $OUT/bench.log
sed -n '/^Mixture/,$p' $OUT/bench2.log; tail -3 $OUT/bench2.log
