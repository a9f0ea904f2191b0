#!/bin/bash
# s7-step2 (v10, the one call): the tests v10a (o and down at split 4) and v10b (the rotations by
# warp shuffles) touch, in parallel; then bench model old (main ae15127) / new (s7-step2)
# alternating twice. Run from the repo root with .gpu-step2/ carried (bundle.tar.xz: the
# binaries, gocoder-23m).
set -o pipefail
T0=$(date +%s)
cd .gpu-step2; G=$PWD; R=$OUT/r; mkdir -p $R; cp run.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode* *.test
export BITDECODE_GOCODER_DIR=$G/gocoder-23m
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; echo "extracted $(( $(date +%s) - T0 )) s"; } > $R/times.txt 2>&1
T=75
tst() { # name binary regexp
  (timeout $T ./$2 -test.v -test.timeout ${T}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) &
}
tst kernels kernels.test '^(TestGEMVGroups|TestGEMVMatchesReference|TestGEMVDependentLaunch|TestKVAppendRot|TestOpsHadamard|TestOpsConvert|TestGridDependentKernelsWait)$'
tst backend backend.test '^(TestModelMatchesCPU|TestModelPDLSameBits|TestLinearGroup)$'
tst gpukv_graph gpukv.test '^TestGPUGraphReplaySameBits$'
tst gpukv_ref gpukv.test '^TestGPUCacheMatchesReference$/rot'
wait; echo "tests done $(( $(date +%s) - T0 )) s" >> $R/times.txt; snap
for i in 1 2; do
  for v in old new; do
    B=./bitdecode-$v; [ $v = new ] && B=./bitdecode
    timeout 25 $B bench model --ctx 1k,128k --kv fp16,int4 --steps 64 --no-linears --json $R/model_${v}_$i.json > $R/model_${v}_$i.log 2>&1; echo "rc=$?" >> $R/model_${v}_$i.log
    echo "$v $i $(( $(date +%s) - T0 )) s" >> $R/times.txt; snap
  done
done
grep -h "^--- FAIL\|^FAIL\|^ok\|^PASS\|rc=\|panic" $R/kernels.log $R/backend.log $R/gpukv_graph.log $R/gpukv_ref.log
grep -h "ms/step\|rc=" $R/model_*.log | head -40
cat $R/times.txt
