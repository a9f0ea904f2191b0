#!/bin/bash
# The int4 load test with free greedy decoding, in pools small enough to preempt.
set -o pipefail
cd "$(dirname "$0")"
L=$OUT/logs; mkdir -p $L
python3 -c "import lzma,tarfile; tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('b')"
cd b; chmod +x bitdecode loadtest; M=$PWD/gocoder-23m
for mem in 14MiB 13MiB; do
  ./bitdecode serve --device cuda --model $M --kv int4 --kv-memory $mem --max-seqs 16 --ctx-size 2048 --addr 127.0.0.1:18080 > $L/serve_int4_$mem.log 2>&1 &
  sp=$!; for i in $(seq 60); do (exec 3<>/dev/tcp/127.0.0.1/18080) 2>/dev/null && break; sleep 1; done
  timeout 120 ./loadtest --url http://127.0.0.1:18080 --n 64 --free --want-preemption > $L/load_int4_$mem.txt 2>&1; echo "rc=$?" >> $L/load_int4_$mem.txt
  kill $sp; wait $sp
done
cd $OUT && tar czf results.tgz logs && rm -rf logs
