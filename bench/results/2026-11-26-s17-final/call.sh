#!/bin/bash
# Session 17, lead call: the merged tree's GPU tests that the session's merges touch together
# (families, transformers fixtures, GeGLU folds, gemmq routes), a GPU serve smoke
# test (sampled rows on several goroutines, structured output, tool calls)
# and the step at B = 1 and 32. Run from the repo root with .gpu/ carried (bundle.tar.xz from build.sh).
set -o pipefail
cd .gpu; G=$PWD; R=$OUT/r; mkdir -p $R
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode *.test
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >> $R/times.txt; nproc >> $R/times.txt
export BITDECODE_CACHE_DIR=$G/cache
tst() { local to=$1; shift; (cd $G/$4 && timeout $to $G/$2 -test.v -test.timeout ${to}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) & }
mkdir -p $G/kvcache/gpukv $G/backend/gpu
tst 240 gpukv1 gpukv.test '^(TestGPUTransformers)$' kvcache/gpukv
tst 240 gpukv2 gpukv.test '^(TestGPUSyntheticFamilies)$' kvcache/gpukv
tst 200 backend1 backend.test '^(TestFoldSwiGLU|TestFoldSwiGLUJoined|TestElementwise|TestGEMMQRoutes|TestJoinTiled)$' backend/gpu
# A GPU serve smoke test on the embedded model: sampled, constrained and tool requests at once.
./bitdecode serve --device cuda --kv int4 --addr 127.0.0.1:8095 > $R/serve.log 2>&1 &
SP=$!
for i in $(seq 60); do curl -s localhost:8095/health >/dev/null && break; sleep 1; done
C=http://127.0.0.1:8095/v1/chat/completions
tools='"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string","maxLength":8}},"required":["city"]}}}]'
pids=()
for k in $(seq 8); do
  curl -s $C -H 'content-type: application/json' -d '{"model":"gotiny","messages":[{"role":"user","content":"func main() {"}],"max_tokens":48,"temperature":0.8,"top_p":0.95,"seed":'$k',"n":2}' > $R/sampled$k.json & pids+=($!)
  curl -s $C -H 'content-type: application/json' -d '{"model":"gotiny","messages":[{"role":"user","content":"Weather?"}],"max_tokens":60,"temperature":0,"tool_choice":{"type":"function","function":{"name":"get_weather"}},'"$tools"'}' > $R/tool$k.json & pids+=($!)
  curl -s $C -H 'content-type: application/json' -d '{"model":"gotiny","messages":[{"role":"user","content":"JSON"}],"max_tokens":60,"temperature":1,"seed":'$k',"response_format":{"type":"json_object"}}' > $R/json$k.json & pids+=($!)
done
wait "${pids[@]}"
sleep 2; kill $SP; t serve; snap
wait; t tests; snap
# The step on the merged tree (Llama-3.1-8B shapes, int4 KV, 1K): B = 1 and 32 sequences.
for b in 1 32; do
  timeout 120 ./bitdecode bench model --ctx 1k --kv int4 --weights fp16,int4 --batch $b --steps 16 --no-linears > $R/step$b.log 2>&1; echo "rc=$?" >> $R/step$b.log; t step$b; snap
done
for f in $R/*.log; do echo "== $(basename $f): $(grep -c -- '--- FAIL' $f) FAIL, $(grep -c -- '--- PASS' $f) PASS, $(tail -1 $f)"; done
python3 - <<'PY'
import json,glob,os
R=os.environ['OUT']+'/r'
for kind in ('sampled','tool','json'):
    ok=0; bad=[]
    for f in sorted(glob.glob(f'{R}/{kind}*.json')):
        try:
            d=json.load(open(f)); ch=d['choices']
            if kind=='tool':
                tc=ch[0]['message']['tool_calls'][0]; json.loads(tc['function']['arguments']); assert tc['function']['name']=='get_weather'
            elif kind=='json':
                if ch[0]['finish_reason']=='stop': json.loads(ch[0]['message']['content'])
            else:
                assert len(ch)==2 and all(c['message']['content'] is not None for c in ch)
            ok+=1
        except Exception as e:
            bad.append((os.path.basename(f), repr(e)[:200]))
    print(kind, ok, 'ok', bad)
PY
grep -h 'ms/step\|ms a step\|tok/s' $R/step*.log | head -20
cat $R/times.txt
