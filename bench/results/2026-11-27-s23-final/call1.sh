#!/bin/bash
# session 23 lead: the merged tree's GPU tests and a step A/B against the session start (d56ce9d)
set -x
R=$(pwd); G=$R/.gpu-final; mkdir -p $OUT/l; cd $G && tar xJf bins.tar.xz && cd $R
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv > $OUT/l/gpu.txt
(cd gpu/kernels && timeout 240 $G/kernels.test -test.run 'TestGEMVQ52MatchesV51|TestGEMVQ6MatchesV5|TestGEMVQ6DECMatchesV61|TestGEMVQ6DECPart|TestDECSelectMatchesWQ|TestGEMVQTiledMatchesWQ' -test.timeout 235s -test.v > $OUT/l/t_kernels_q.log 2>&1; echo rc=$? >> $OUT/l/t_kernels_q.log) &
(cd gpu/kernels && timeout 240 $G/kernels.test -test.run 'TestGPUDecodeSeqSplits|TestGPUDecodeLookAheadMatchesRefold|TestGPUDecodeOneSplitMatchesCombine' -test.timeout 235s -test.v > $OUT/l/t_kernels_d.log 2>&1; echo rc=$? >> $OUT/l/t_kernels_d.log) &
(cd backend/gpu && timeout 240 $G/gpu.test -test.run 'TestQuantLinearTiled|TestQuantLinearQ6DEC|TestDECRun|TestJoinTiled|TestQ6DECNormSelect' -test.timeout 235s -test.v > $OUT/l/t_gpu.log 2>&1; echo rc=$? >> $OUT/l/t_gpu.log) &
(cd kvcache/gpukv && timeout 240 $G/gpukv.test -test.run 'TestGPUTransformers|TestGPUModelDECLists|TestGPUGraphReplaySameBits|TestGPUBatchInvariantLogits' -test.timeout 235s -test.v > $OUT/l/t_gpukv.log 2>&1; echo rc=$? >> $OUT/l/t_gpukv.log) &
wait
for b in base bitdecode; do
  echo "== $b" >> $OUT/l/step.log
  timeout 110 $G/$b bench model --ctx 1k,128k --kv int4,int2 --weights int4 --no-linears --steps 32 >> $OUT/l/step.log 2>&1
done
cd $OUT && tar czf results.tgz l && rm -rf l
