#!/bin/bash
# Session 16, lead call E: int4/int3 k and v (1024x4096) at 17-128 rows, gemmq.cu against the
# dequantization + cuBLASLt ("deq", BenchmarkGEMMQ), and the step at B = 32, 64 with the final tree
# (bitdecode) against a build routing weights under 2048 rows to the dequantization for every width
# (bitdecode-kvdeq, gemmqRoutes: N >= 2048), alternated twice.
set -o pipefail
cd .gpu; R=$OUT/r; mkdir -p $R
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode* *.test
export BITDECODE_CACHE_DIR=$PWD/cache
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/times.txt
timeout 200 ./kernels.test -test.run '^$' -test.bench 'GEMMQ/^int[34]$/^(1024x4096|4096x4096)$/^T=(24|32|64|128)$/^(default|deq)$/^auto$' -test.benchtime 1x > $R/bench_gemmq.log 2>&1; echo "rc=$?" >> $R/bench_gemmq.log
date -u +%T" bench" >> $R/times.txt
for i in 1 2; do
  for b in bitdecode bitdecode-kvdeq; do
    for B in 32 64; do
      timeout 60 ./$b bench model --ctx 1k --kv int4 --weights int4,int3 --batch $B --steps 16 --no-linears > $R/${b}_b${B}_$i.log 2>&1; echo "rc=$?" >> $R/${b}_b${B}_$i.log
    done
  done
done
date -u +%T" end" >> $R/times.txt
grep -E "us$|rc=" $R/bench_gemmq.log | awk '{print $1, $(NF-1), $NF}'
for f in $R/bitdecode*.log; do echo "== $(basename $f)"; grep -h "ms/step" $f; done
cat $R/times.txt
