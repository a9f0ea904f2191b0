#!/bin/bash
# Device call 5 (2026-11-25): bw served on the GPU (helper's GPU tests, the
# serve test's GPU branch), and tools/loadtest against serve --device cuda
# (int4 and bw) with a pool small enough to preempt.
cd "$(dirname "$0")"
unxz() { python3 -c "import lzma,sys,shutil; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$1" "$2"; }
mkdir -p /tmp/g /tmp/m && for f in bitdecode loadtest gpukv.test cmd.test; do unxz $f.xz /tmp/g/$f && chmod +x /tmp/g/$f; done
unxz gm.tar.xz /tmp/m/gm.tar && tar xf /tmp/m/gm.tar -C /tmp/m
export BITDECODE_CACHE_DIR=/tmp/bdcache BITDECODE_GOCODER_DIR=/tmp/m/gocoder-23m
M=/tmp/m/gocoder-23m B=/tmp/g/bitdecode R=/tmp/r
mkdir -p $R
T0=$(date +%s)
stamp() { echo "$(( $(date +%s) - T0 ))s $*" >> $R/timeline.txt; }
pack() { flock /tmp/pack.lock sh -c "tar czf $OUT/results.tmp -C $R . && mv $OUT/results.tmp $OUT/results.tgz"; }
( timeout 150 /tmp/g/gpukv.test -test.run '^(TestGPUPlaneScheduler|TestGPUPlaneCacheMatchesReference|TestGPUPlaneCacheGolden|TestPlaneBook|TestPlaneServeScenarioCPU)$' -test.v -test.timeout 3m > $R/t_planes.log 2>&1; echo "exit $?" >> $R/t_planes.log; stamp t_planes; pack ) &
( cd /tmp && timeout 60 /tmp/g/cmd.test -test.run 'TestServeBWOnCUDA' -test.v > $R/t_serve_bw.log 2>&1; echo "exit $?" >> $R/t_serve_bw.log; stamp t_serve_bw; pack ) &
serve_load() { # name port kv memory extra-loadtest-args
  local name=$1 port=$2 kv=$3 mem=$4; shift 4
  $B serve --device cuda --model $M --kv $kv --kv-memory $mem --max-seqs 16 --ctx-size 2048 --addr 127.0.0.1:$port --quiet > $R/serve_$name.log 2>&1 &
  local pid=$!
  for i in $(seq 1 60); do curl -s 127.0.0.1:$port/health > /dev/null && break; sleep 0.5; done
  timeout 100 /tmp/g/loadtest --url http://127.0.0.1:$port "$@" > $R/load_$name.txt 2>&1; echo "exit $?" >> $R/load_$name.txt
  curl -s 127.0.0.1:$port/metrics | grep -E "^bitdecode_(kv_blocks|preemptions|prefix|kv_tier|running|queue)" > $R/metrics_$name.txt
  kill $pid; stamp load_$name; pack
}
serve_load int4 8101 int4 20MiB --n 72 --want-preemption &
serve_load bw 8102 bw:h20:m40:l40 40MiB --n 48 &
wait
stamp done
pack
cat $R/timeline.txt; grep -h "^exit\|^--- FAIL\|^--- PASS\|^PASS\|^FAIL\|^load:" $R/*.log $R/*.txt | sort | uniq -c
