#!/bin/bash
# Device call 3 (2026-11-25): the shared-kernel fix, the per-layer evals
# that failed in call 2, long-range name recall per format, the server.
cd "$(dirname "$0")"
unxz() { python3 -c "import lzma,sys,shutil; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$1" "$2"; }
mkdir -p /tmp/g /tmp/m && for f in bitdecode gpukv.test cuda.test; do unxz $f.xz /tmp/g/$f && chmod +x /tmp/g/$f; done
unxz gm.tar.xz /tmp/m/gm.tar && tar xf /tmp/m/gm.tar -C /tmp/m
export BITDECODE_CACHE_DIR=/tmp/bdcache BITDECODE_GOCODER_DIR=/tmp/m/gocoder-23m
M=/tmp/m/gocoder-23m B=/tmp/g/bitdecode R=/tmp/r
mkdir -p $R
T0=$(date +%s)
stamp() { echo "$(( $(date +%s) - T0 ))s $*" >> $R/timeline.txt; }
pack() { flock /tmp/pack.lock sh -c "tar czf $OUT/results.tmp -C $R . && mv $OUT/results.tmp $OUT/results.tgz"; }
$B run --device cuda --model $M --kv int2@3+5=int8 --max-tokens 16 "func main() {" > $R/run_layers.txt 2>&1; stamp run rc=$?
job() { local name=$1; shift; ( timeout 280 "$@" > $R/$name.md 2> $R/$name.log; echo "exit $?" >> $R/$name.log; stamp $name; pack ) & }
job t_gpukv /tmp/g/gpukv.test -test.run 'TestGPUKernelsSharedAcrossCaches|TestGPUPerLayerFormats|TestGPUCacheGolden|TestGPUScheduler' -test.v -test.timeout 4m
job t_cuda /tmp/g/cuda.test -test.run TestGPU -test.timeout 4m
job layers_a $B eval ppl --device cuda --model $M --file $M/heldout.txt --ctx 8192 --windows 16 \
  --kv fp16,int2,int2@0=int8,int2@-1=int8,int2@0+-1=int8,int2@3+5=int8,int2@3+5=int4,int2@0..1+-2..-1=int8,k4v2@3+5=int8,int4@3+5=int8,int4@0=int8 --json $R/layers_a.json
job reuse $B eval ppl --device cuda --model $M --file $M/heldout.txt --ctx 8192 --windows 16 --reuse-gap 2048 \
  --kv fp16,int8,int4,int4:kc32:v32,int2,int2:kc32:v32,k4v2,int2@3+5=int8 --json $R/reuse.json
job needle $B eval needle --device cuda --model $M --file $M/heldout.txt --ctx 8192 --trials 6 \
  --kv fp16,int2,int2@0+-1=int8,int2@3+5=int8,k4v2@3+5=int8 --json $R/needle.json
( $B serve --device cuda --model $M --kv int2@3+5=int8 --addr 127.0.0.1:8089 > $R/serve.log 2>&1 & echo $! > /tmp/serve.pid
  sleep 20
  python3 - > $R/serve_client.txt 2>&1 <<'PY'
import json, urllib.request
def post(body):
    r = urllib.request.Request("http://127.0.0.1:8089/v1/chat/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    return urllib.request.urlopen(r, timeout=60).read().decode()
print(urllib.request.urlopen("http://127.0.0.1:8089/v1/models", timeout=10).read().decode())
print(post({"model": "gocoder-23m", "messages": [{"role": "user", "content": "package main"}], "max_tokens": 24, "temperature": 0}))
print(post({"model": "gocoder-23m", "messages": [{"role": "user", "content": "func f() {"}], "max_tokens": 16, "stream": True, "logprobs": True, "top_logprobs": 2, "seed": 3}))
PY
  kill $(cat /tmp/serve.pid); stamp serve; pack ) &
wait
stamp done
pack
cat $R/timeline.txt; grep -h "^exit\|^--- FAIL\|^ok\|^PASS" $R/*.log | sort | uniq -c
