#!/bin/bash
# s19-gemv call 3 (2026-11-26): gemv.cu v12.1 + the interleaved item order (v29c). Tests (the stream on, both
# orders), bench gemv --rows 1 --variants (new), bench model B = 1 (1K, 32K, 128K; fp16, int4, int2) main and the
# interleaved stream modes alternated twice, then ncu sections for o's default, stream and interleaved kernels.
set -o pipefail
T0=$(date +%s)
cd .gpu-gemv; R=/tmp/r; mkdir -p $R
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
cd b; cp ../call3.sh $R/
chmod +x bitdecode* *.test
snap() { (cd /tmp && tar czf $OUT/results.tmp r && mv $OUT/results.tmp $OUT/results.tgz); }
el() { echo $(( $(date +%s) - T0 )); }
t() { echo "$(date -u +%T) $(el) s $*" >> $R/times.txt; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } > $R/times.txt 2>&1; t extracted
T=170
tst() { local n=$1 b=$2 re=$3; shift 3; (env "$@" timeout $T ./$b -test.v -test.timeout ${T}s -test.run "$re" > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log) & }
tst kernels kernels.test '^(TestGEMVStream|TestGEMVStreamConstants|TestGEMVStreamGeometry|TestGridDependentKernelsWait|TestGEMVDependentLaunch|TestGEMVGroups)$' X=0
tst backend backend.test '^(TestLinearGraphReplay|TestFoldRoPE|TestGroupGraphReplay|TestEarlyNormInputs|TestParseOptions)$' BITDECODE_GEMV_STREAM=plain,rope,inter,depth=8 BITDECODE_GEMV_EARLY=plain,rope
W="--batch 1 --ctx 1k --kv fp16 --steps 2 --no-linears"
(timeout $T ./bitdecode-base bench model $W > $R/warm_base.log 2>&1; echo "rc=$?" >> $R/warm_base.log) &
(timeout $T ./bitdecode bench model $W > $R/warm_new.log 2>&1; echo "rc=$?" >> $R/warm_new.log) &
(BITDECODE_GEMV_STREAM=plain,rope timeout $T ./bitdecode bench model $W > $R/warm_newS.log 2>&1; echo "rc=$?" >> $R/warm_newS.log) &
wait; t tests; snap
timeout 120 ./bitdecode bench gemv --rows 1 --variants --json $R/variants.json > $R/variants.log 2>&1; echo "rc=$?" >> $R/variants.log
t variants; snap
run() { # name binary args env...
  local v=$1 bin=$2 a=$3; shift 3
  env "$@" timeout 90 ./$bin bench model $a --no-linears --json $R/b_${v}.json > $R/b_${v}.log 2>&1; echo "rc=$?" >> $R/b_${v}.log
  t "$v"
}
FULL="--batch 1 --ctx 1k,32k,128k --kv fp16,int4,int2 --steps 32"
for i in 1 2; do
  run base_$i bitdecode-base "$FULL" X=0
  run new_$i bitdecode "$FULL" X=0
  run sP8i_$i bitdecode "$FULL" BITDECODE_GEMV_STREAM=plain,depth=8,inter
  run sPR8i_$i bitdecode "$FULL" BITDECODE_GEMV_STREAM=plain,rope,depth=8,inter
  snap
done
nk() { # name kernel-regex
  timeout 80 ncu --kernel-name-base demangled --kernel-name "regex:$2" --launch-count 1 --cache-control all --clock-control none \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats --section Occupancy \
    ./bitdecode bench gemv --rows 1 --variants > $R/ncuk_$1.txt 2>&1; echo "rc=$?" >> $R/ncuk_$1.txt
  t ncuk_$1; snap
}
[ $(el) -lt 250 ] && nk def 'gemv_f16<1, 4, 1>'
[ $(el) -lt 300 ] && nk s8 'gemv_f16_stream<1, 4, 2, 8>'
t end; snap
grep -h "read ceiling" $R/b_base_1.log | head -1
grep -h "^gemv" $R/variants.log | grep -v "depth  [48]\|depth 16\|gate" | head -60
python3 tab.py $R base
grep -h "^--- FAIL\|^--- PASS\|^FAIL\|^ok\|rc=\|panic" $R/kernels.log $R/backend.log | head -40
grep -h "rc=" $R/warm_*.log $R/variants.log
for f in $R/ncuk_*.txt; do echo "== $f"; grep -E "DRAM Throughput|Memory Throughput|Duration|Achieved Occupancy|Warp Cycles Per Issued|Issued Ipc|L2 Hit|Mem Busy|Max Bandwidth|Stall|rc=|==PROF==|Block Size|Grid Size|Registers" $f | head -40; done
cat $R/times.txt
