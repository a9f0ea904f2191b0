#!/bin/bash
# Device call 6 (2026-11-25): tools/loadtest against serve --device cuda with
# a pool small enough to preempt (int4 and bw).
cd "$(dirname "$0")"
unxz() { python3 -c "import lzma,sys,shutil; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$1" "$2"; }
mkdir -p /tmp/g /tmp/m && for f in bitdecode loadtest; do unxz $f.xz /tmp/g/$f && chmod +x /tmp/g/$f; done
unxz gm.tar.xz /tmp/m/gm.tar && tar xf /tmp/m/gm.tar -C /tmp/m
export BITDECODE_CACHE_DIR=/tmp/bdcache
M=/tmp/m/gocoder-23m B=/tmp/g/bitdecode R=/tmp/r
mkdir -p $R
serve_load() { # name port kv memory loadtest-args
  local name=$1 port=$2 kv=$3 mem=$4; shift 4
  $B serve --device cuda --model $M --kv $kv --kv-memory $mem --max-seqs 16 --ctx-size 2048 --addr 127.0.0.1:$port --quiet > $R/serve_$name.log 2>&1 &
  local pid=$!
  for i in $(seq 1 60); do curl -s 127.0.0.1:$port/health > /dev/null && break; sleep 0.5; done
  timeout 100 /tmp/g/loadtest --url http://127.0.0.1:$port "$@" > $R/load_$name.txt 2>&1; echo "exit $?" >> $R/load_$name.txt
  curl -s 127.0.0.1:$port/metrics | grep -E "^bitdecode_(kv_blocks|preemptions|prefix|kv_tier|running|queue)" > $R/metrics_$name.txt
  kill $pid
}
serve_load int4 8101 int4 15MiB --n 72 --want-preemption &
serve_load bw 8102 bw:h20:m40:l40 12MiB --n 48 --want-preemption &
wait
tar czf $OUT/results.tgz -C $R .
cat $R/load_*.txt
