#!/bin/bash
# Session 16, lead call D: B = 1 packed-weight steps, call B's tree (36aa87c, bitdecode-b) against the
# final tree (bitdecode) alternated, to see whether int8's gemmq.cu merge moved B = 1.
set -o pipefail
cd .gpu; R=$OUT/r; mkdir -p $R
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode*
export BITDECODE_CACHE_DIR=$PWD/cache
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/times.txt
W="bench model --ctx 1k,32k --kv int4 --weights int4,int3,int8 --batch 1 --steps 32 --no-linears"
for i in 1 2 3; do
  for b in bitdecode-b bitdecode; do timeout 90 ./$b $W > $R/${b}_$i.log 2>&1; echo "rc=$?" >> $R/${b}_$i.log; done
done
for f in $R/bitdecode*.log; do echo "== $(basename $f)"; grep -h "ms/step" $f; done
