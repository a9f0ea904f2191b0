#!/bin/bash
# s5-pdl device call 2: PDL microbenchmarks (graph chain, 8 decode layers without attention),
# bench model with more steps (off / on / early alternating), an nsys kernel trace of a step
# (on and off) if nsys exists, and TestQuantLinearDEC (cut by call 1's timeout).
set -o pipefail
cd "$(dirname "$0")"
L=$OUT/logs; mkdir -p $L
python3 -c "import lzma,tarfile; tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('b')"
cd b; chmod +x bitdecode *.test
export BITDECODE_CACHE_DIR=$PWD/kcache
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
pack() { tar czf $OUT/results.tgz -C $OUT logs; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv; command -v nsys ncu; ls -d /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems* 2>/dev/null; } > $L/gpu.txt 2>&1
timeout 40 ./cuda.test -test.run '^$' -test.bench GraphChainPDL -test.count 3 > $L/bench_chain.log 2>&1; echo "rc=$? at $(el) s" >> $L/bench_chain.log
timeout 70 ./kernels.test -test.run '^$' -test.bench DecodeLayersPDL -test.count 3 -test.benchtime 100x > $L/bench_layers.log 2>&1; echo "rc=$? at $(el) s" >> $L/bench_layers.log
pack
for i in 1 2; do
  for m in off early; do
    case $m in off) e="BITDECODE_NO_PDL=1";; on) e="BITDECODE_NO_PDL=0";; early) e="BITDECODE_PDL_EARLY=1";; esac
    env $e timeout 20 ./bitdecode bench model --ctx 1k,32k --kv fp16,int4 --steps 128 --no-linears --json $L/model_${m}_$i.json > $L/model_${m}_$i.log 2>&1
    echo "rc=$? at $(el) s ($e)" >> $L/model_${m}_$i.log
  done
done
pack
NSYS=$(command -v nsys || ls /usr/local/cuda*/bin/nsys 2>/dev/null | head -1)
if [ -n "$NSYS" ]; then
  for m in off on; do
    [ $(el) -gt 120 ] && break
    e="BITDECODE_NO_PDL=0"; [ $m = off ] && e="BITDECODE_NO_PDL=1"
    env $e timeout 30 $NSYS profile --cuda-graph-trace=node --trace=cuda -o ns_$m -f true ./bitdecode bench model --ctx 1k --kv fp16 --steps 8 --no-linears > $L/nsys_$m.log 2>&1
    echo "profile rc=$? at $(el) s" >> $L/nsys_$m.log
    timeout 20 $NSYS stats --report cuda_gpu_trace --format csv --output tr_$m ns_$m.nsys-rep >> $L/nsys_$m.log 2>&1
    echo "stats rc=$? at $(el) s" >> $L/nsys_$m.log
    f=$(ls tr_${m}*.csv 2>/dev/null | head -1); [ -n "$f" ] && gzip -c "$f" > $L/trace_$m.csv.gz
    pack
  done
fi
left=$(( 165 - $(el) ))
if [ $left -gt 20 ]; then
  timeout $left ./gpu.test -test.run 'TestQuantLinearDEC' -test.v > $L/backend_dec.log 2>&1; echo "rc=$? at $(el) s" >> $L/backend_dec.log
fi
pack && rm -rf $L
