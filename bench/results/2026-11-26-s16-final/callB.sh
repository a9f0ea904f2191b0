#!/bin/bash
# Session 16, lead call B: the final merged tree (int8 tiled + gemmq.cu + packed q|k|v joined).
# The GPU tests the merges touch (6 processes in parallel), prompt scoring through `serve` on the GPU
# against the CPU, then the packed-weight steps: session 16's start (bitdecode-base, f37916d) and the
# merged tree alternated at B = 1 (1K, 32K) and B = 32, 64 (1K).
# Run from the repo root with .gpu/ carried (bundle.tar.xz from build.sh).
set -o pipefail
cd .gpu; G=$PWD; R=$OUT/r; mkdir -p $R; cp callB.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode* *.test
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $R/times.txt
export BITDECODE_CACHE_DIR=$G/cache
tst() { local to=$1; shift; (timeout $to ./$2 -test.v -test.timeout ${to}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) & }
tst 200 kgemvq kernels.test '^(TestGEMVQMatchesReference|TestGEMVQ52MatchesV51|TestPackTilesMatchesWQ|TestGEMVQ6MatchesV5|TestGEMVQTiledMatchesWQ|TestGEMMQMatchesReference)$'
tst 200 backend1 backend.test '^(TestQuantLinear|TestTiledOnlyCopy|TestTiledLayoutRouting|TestTiledLayoutBytes|TestLinearGraphReplay)$'
tst 260 backend2 backend.test '^(TestQuantLinearTiled)$'
tst 200 backend3 backend.test '^(TestJoinTiled|TestJoinTiledSwiGLU|TestJoinTiledKnobs|TestJoinWeights|TestFoldSwiGLUJoined|TestFoldRoPEAppend|TestFoldHalfAndRoPEJoined|TestFoldRoPE|TestLinearGroup)$'
tst 200 backend4 backend.test '^(TestModelQuantMatchesCPU|TestModelMatchesCPU|TestForwardGreedyTokens|TestQuantLinearGroupDEC)$'
tst 200 gpukv gpukv.test '^(TestGPUSyntheticFamilies|TestGPUScheduler|TestGPUGreedyTokens)$'
# prompt scoring (echo + logprobs) and a batch of prompts through serve, GPU against CPU
(
for dev in cuda cpu; do
  port=$((18100 + ${#dev})); ./bitdecode serve --device $dev --addr 127.0.0.1:$port --quiet > $R/serve_$dev.log 2>&1 & pid=$!
  for i in $(seq 60); do curl -s 127.0.0.1:$port/health >/dev/null && break; sleep 1; done
  curl -s -H 'content-type: application/json' 127.0.0.1:$port/v1/completions \
    -d '{"model":"gotiny","prompt":["func main() {\n\tfmt.Println(","package main\n\nimport ("],"max_tokens":1,"temperature":0,"logprobs":2,"echo":true}' > $R/score_$dev.json
  curl -s -H 'content-type: application/json' 127.0.0.1:$port/v1/completions \
    -d '{"model":"gotiny","prompt":"func main() {","max_tokens":0,"logprobs":1,"echo":true}' > $R/score0_$dev.json
  kill $pid; wait $pid 2>/dev/null
done
) ; t serve
wait; t tests; snap
python3 - "$R" > $R/score_cmp.txt 2>&1 <<'PY'
import json, sys
R = sys.argv[1]
for f in ("score", "score0"):
    g = json.load(open(f"{R}/{f}_cuda.json")); c = json.load(open(f"{R}/{f}_cpu.json"))
    for i, (gc, cc) in enumerate(zip(g["choices"], c["choices"])):
        gl, cl = gc["logprobs"]["token_logprobs"], cc["logprobs"]["token_logprobs"]
        d = max(abs(a - b) for a, b in zip(gl[1:], cl[1:])) if len(gl) > 1 else 0
        print(f"{f} choice {i}: {len(gl)} entries (cpu {len(cl)}), first {gl[0]}, max |cuda - cpu| {d:.2e}, tokens equal {gc['logprobs']['tokens'] == cc['logprobs']['tokens']}, text {gc['text']!r}")
PY
run() { local n=$1 s=$2 bin=$3; shift 3; timeout $s ./$bin "$@" > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log; t $n; snap; }
W1="bench model --ctx 1k,32k --kv int4 --weights int4,int3,int8 --batch 1 --steps 32 --no-linears"
for i in 1 2; do
  run b1_base_$i 90 bitdecode-base $W1
  run b1_new_$i 90 bitdecode $W1
done
for b in 32 64; do
  run b${b}_base 90 bitdecode-base bench model --ctx 1k --kv int4 --weights fp16,int4,int3,int8 --batch $b --steps 16 --no-linears
  run b${b}_new 90 bitdecode bench model --ctx 1k --kv int4 --weights fp16,int4,int3,int8 --batch $b --steps 16 --no-linears
done
t end; snap
for f in $R/*.log; do case $f in *serve*) continue;; esac; echo "== $(basename $f): $(grep -c -- '--- FAIL' $f) FAIL, $(grep -c -- '--- PASS' $f) PASS, $(tail -1 $f)"; done
cat $R/score_cmp.txt
for f in $R/b*_*.log; do echo "== $(basename $f)"; grep -h "ms/step" $f; done
cat $R/times.txt
