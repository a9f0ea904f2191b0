#!/bin/bash
# issue #23: TP 2 CUDA graphs at batch 64 and max; before (main) and after (s8-tpgraph).
cd "$(dirname "$0")"
D=$OUT/logs; mkdir -p $D
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
pack() { tar czf $OUT/results.tgz -C $OUT logs; }
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv > $D/gpus.txt 2>&1
# GPU tests first, alone (both GPUs).
(cd ../backend/gpu && timeout 40 ../../.gpu-tpgraph/gpu.test -test.v -test.count=1 -test.run 'TestGroupGraphReplay|TestPool' > $D/tests.log 2>&1; echo "rc=$? at $(el)s" >> $D/tests.log)
pack
B="bench model --preset llama-3.1-8b --ctx 32k --kv int4 --steps 16 --no-linears"
bench() { # name limit bin env... args
  local name=$1 lim=$2 bin=$3; shift 3
  if [ $(( $(el) + lim )) -gt 192 ]; then echo "skipped at $(el)s" > $D/$name.log; pack; return; fi
  echo "start $(el)s: $bin $*" > $D/$name.log
  timeout $lim env "$@" >> $D/$name.log 2>&1; echo "rc=$? end $(el)s" >> $D/$name.log
  grep -h "ms/step (" $D/$name.log | sed "s/^/$name: /" >> $D/summary.txt
  pack
}
bench new_b64_g 32 ./bitdecode-new ./bitdecode-new $B --batch 64 --tp 2
bench new_b64_ng 32 ./bitdecode-new BITDECODE_NO_GRAPHS=1 ./bitdecode-new $B --batch 64 --tp 2
bench main_b64_g 32 ./bitdecode-main ./bitdecode-main $B --batch 64 --tp 2
g=$(grep -o '[0-9.]* ms/step' $D/new_b64_g.log | head -1 | cut -d' ' -f1); n=$(grep -o '[0-9.]* ms/step' $D/new_b64_ng.log | head -1 | cut -d' ' -f1)
if [ -n "$g" ] && [ -n "$n" ] && python3 -c "import sys; sys.exit(0 if $g > 1.08*$n else 1)"; then
  bench new_b64_g_nopdl 32 ./bitdecode-new BITDECODE_NO_PDL=1 ./bitdecode-new $B --batch 64 --tp 2
fi
bench new_max_g 40 ./bitdecode-new ./bitdecode-new $B --batch max --tp 2
bench main_max_g 40 ./bitdecode-main ./bitdecode-main $B --batch max --tp 2
bench new_max_tp1 35 ./bitdecode-new ./bitdecode-new $B --batch max --tp 1
bench new_max_ng 40 ./bitdecode-new BITDECODE_NO_GRAPHS=1 ./bitdecode-new $B --batch max --tp 2
echo "done at $(el)s" >> $D/summary.txt
pack
cat $D/summary.txt; tail -5 $D/tests.log
