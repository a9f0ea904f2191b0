#!/bin/bash
# Device call 2 (2026-11-25, s2-linear): GPU tests of linear.cu, LinearGroup,
# the batch-invariant mode end to end; linear.cu v2 timings; decode steps.
cd "$(dirname "$0")"
unxz() { python3 -c "import lzma,sys,shutil; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$1" "$2"; }
G=/tmp/g R=/tmp/r; mkdir -p $G $R /tmp/m
for f in bitdecode bitdecode.main gpukv.test bgpu.test kernels.test; do unxz $f.xz $G/$f & done
unxz gm.tar.xz /tmp/m/gm.tar & wait
chmod +x $G/*; tar xf /tmp/m/gm.tar -C /tmp/m
export BITDECODE_CACHE_DIR=/tmp/bdcache BITDECODE_GOCODER_DIR=/tmp/m/gocoder-23m
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/gpu.txt
( cd $G && ./kernels.test -test.run 'Linear|GEMV' -test.v > $R/t_kernels.log 2>&1; echo "exit $?" >> $R/t_kernels.log )
( cd $G && timeout 120 ./bgpu.test -test.v > $R/t_backend_gpu.log 2>&1; echo "exit $?" >> $R/t_backend_gpu.log )
( cd $G && timeout 150 ./gpukv.test -test.run 'BatchInvariant|GPUScheduler|GPUCacheGolden|GPUPrefixScheduler' -test.v > $R/t_gpukv.log 2>&1; echo "exit $?" >> $R/t_gpukv.log )
grep -h -E "^(--- |ok|FAIL|PASS|exit)" $R/t_*.log
timeout 60 $G/bitdecode bench gemv --rows 1,4,8,16,64,256 --json $R/gemv.json > $R/gemv.log 2>&1
cat $R/gemv.log
for b in main new; do
  B=$G/bitdecode; [ $b = main ] && B=$G/bitdecode.main
  timeout 60 $B bench model --ctx 32k --kv fp16,int4 --steps 16 --no-linears > $R/model_$b.log 2>&1
  tail -4 $R/model_$b.log
done
tar czf $OUT/results.tgz -C $R .
