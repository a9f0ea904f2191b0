#!/bin/bash
# Device call 3 (2026-11-25, s2-linear): linear.cu v3 (wide kernel) tests,
# the kernel sweep, decode steps before/after and the cost of invariance.
cd "$(dirname "$0")"
unxz() { python3 -c "import lzma,sys,shutil; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$1" "$2"; }
G=/tmp/g R=/tmp/r; mkdir -p $G $R
for f in bitdecode bitdecode.main bitdecode.v2 gpukv.test bgpu.test kernels.test; do unxz $f.xz $G/$f & done; wait
chmod +x $G/*
export BITDECODE_CACHE_DIR=/tmp/bdcache
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/gpu.txt
( cd $G && timeout 60 ./kernels.test -test.run 'Linear' -test.v > $R/t_kernels.log 2>&1; echo "exit $?" >> $R/t_kernels.log )
( cd $G && timeout 60 ./bgpu.test -test.run 'Linear|BatchInvariant|Model|Options' -test.v > $R/t_backend_gpu.log 2>&1; echo "exit $?" >> $R/t_backend_gpu.log )
( cd $G && timeout 60 ./gpukv.test -test.run 'BatchInvariant' -test.v > $R/t_gpukv.log 2>&1; echo "exit $?" >> $R/t_gpukv.log )
grep -h -E "^(--- |ok|FAIL|PASS|exit|panic)|rror" $R/t_*.log | head -60
B=$G/bitdecode
grep -q "^exit 0" $R/t_kernels.log || { echo "v3 failed: benchmarks with v2"; B=$G/bitdecode.v2; }
timeout 70 $B bench gemv --rows 1,2,4,8,16,64,256 --json $R/gemv.json > $R/gemv.log 2>&1; cat $R/gemv.log
m() { # name env args
  local n=$1 e=$2 b=$3; shift 3
  env $e timeout 60 $b bench model --ctx 32k --steps 16 --no-linears "$@" > $R/model_$n.log 2>&1
  echo "== $n ($e)"; grep -E "^\| fp16" $R/model_$n.log
}
m b1_main X=1 $G/bitdecode.main --kv fp16,int4
m b1_new X=1 $B --kv fp16,int4
m b1_new_mma BITDECODE_MMA_DECODE=1 $B --kv fp16,int4
m b1_new_inv BITDECODE_BATCH_INVARIANT=1 $B --kv fp16,int4
m max_new X=1 $B --kv fp16,int4 --batch max
m max_new_inv BITDECODE_BATCH_INVARIANT=1 $B --kv fp16,int4 --batch max
tar czf $OUT/results.tgz -C $R .
