#!/bin/bash
# session 23 lead, call 2: the backend's quantized-Linear tests that call 1's 235 s process cut (slow: three backends compile their kernels)
R=$(pwd); G=$R/.gpu-final; mkdir -p $OUT/l; cd $G && tar xJf bins.tar.xz gpu.test && cd $R
(cd backend/gpu && timeout 330 $G/gpu.test -test.run 'TestQuantLinearTiled$' -test.timeout 325s -test.v > $OUT/l/t_tiled.log 2>&1; echo rc=$? >> $OUT/l/t_tiled.log) &
(cd backend/gpu && timeout 330 $G/gpu.test -test.run 'TestQuantLinearQ6DEC' -test.timeout 325s -test.v > $OUT/l/t_q6dec.log 2>&1; echo rc=$? >> $OUT/l/t_q6dec.log) &
wait
cd $OUT && tar czf results.tgz l && rm -rf l
