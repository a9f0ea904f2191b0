#!/bin/bash
# Merged main at the end of the session: the kernel tests of the two last branches (ops.cu rmsnorm, dec.cu), alone on the GPU.
set -o pipefail
cd "$(dirname "$0")"; L=$OUT; chmod +x kernels.test
date -u > $L/kernels.log
timeout 200 ./kernels.test -test.run 'DEC|GEMVQ|TestOps' -test.v -test.timeout 190s >> $L/kernels.log 2>&1; echo "rc=$?" >> $L/kernels.log
