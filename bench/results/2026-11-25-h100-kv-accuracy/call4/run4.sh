#!/bin/bash
# Device call 4 (2026-11-25): rotation on the GPU (ops hadamard, rotated
# caches, the default), prefix sharing in the GPU cache, the shared backend
# checks; a GPU eval of the rotated formats; the server sharing a prefix.
cd "$(dirname "$0")"
unxz() { python3 -c "import lzma,sys,shutil; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$1" "$2"; }
mkdir -p /tmp/g /tmp/m && for f in bitdecode gpukv.test kernels.test gpu.test; do unxz $f.xz /tmp/g/$f && chmod +x /tmp/g/$f; done
unxz gm.tar.xz /tmp/m/gm.tar && tar xf /tmp/m/gm.tar -C /tmp/m
export BITDECODE_CACHE_DIR=/tmp/bdcache BITDECODE_GOCODER_DIR=/tmp/m/gocoder-23m
M=/tmp/m/gocoder-23m B=/tmp/g/bitdecode R=/tmp/r
mkdir -p $R
T0=$(date +%s)
stamp() { echo "$(( $(date +%s) - T0 ))s $*" >> $R/timeline.txt; }
pack() { flock /tmp/pack.lock sh -c "tar czf $OUT/results.tmp -C $R . && mv $OUT/results.tmp $OUT/results.tgz"; }
{ $B run --device cuda --model $M --kv int4 --max-tokens 32 "func main() {"; $B run --device cuda --model $M --kv int4:norot --max-tokens 32 "func main() {"; $B run --device cpu --model $M --kv int4 --max-tokens 32 "func main() {"; } > $R/run_rot.txt 2>&1; stamp run rc=$?
job() { local name=$1; shift; ( timeout 330 "$@" > $R/$name.md 2> $R/$name.log; echo "exit $?" >> $R/$name.log; stamp $name; pack ) & }
job t_gpukv /tmp/g/gpukv.test -test.run 'TestGPU|TestPagedBook' -test.v -test.timeout 6m
job t_kernels /tmp/g/kernels.test -test.run 'TestOps' -test.v -test.timeout 4m
job t_backend /tmp/g/gpu.test -test.v -test.timeout 5m
job rot $B eval ppl --device cuda --model $M --file $M/heldout.txt --ctx 8192 --windows 16 \
  --kv fp16,int4:norot,int4,int4:kt128:norot,int4:kt128,int2:norot,int2,k4v2:norot,k4v2,int2@3+5=int8 --json $R/rot.json
( $B serve --device cuda --model $M --kv int4 --addr 127.0.0.1:8089 --prefill-chunk 128 > $R/serve.log 2>&1 & echo $! > /tmp/serve.pid
  sleep 20
  python3 - > $R/serve_client.txt 2>&1 <<'PY'
import json, urllib.request
def post(body):
    r = urllib.request.Request("http://127.0.0.1:8089/v1/chat/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(r, timeout=60).read().decode())
system = open("/tmp/m/gocoder-23m/heldout.txt").read()[:3000]
for q in ["package main", "func f() {", "package main"]:
    out = post({"model": "gocoder-23m", "messages": [{"role": "system", "content": system}, {"role": "user", "content": q}], "max_tokens": 16, "temperature": 0})
    print(json.dumps({"q": q, "usage": out["usage"], "text": out["choices"][0]["message"]["content"]}))
PY
  curl -s http://127.0.0.1:8089/metrics | grep -i "prefix\|cached" > $R/serve_metrics.txt 2>&1
  kill $(cat /tmp/serve.pid); stamp serve; pack ) &
wait
stamp done
pack
cat $R/timeline.txt; grep -h "^exit\|^--- FAIL\|^ok\|^PASS\|^FAIL" $R/*.log $R/*.md | sort | uniq -c
