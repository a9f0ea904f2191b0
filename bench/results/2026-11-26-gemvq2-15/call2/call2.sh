#!/bin/bash
# call2.sh (s15-gemvq2, call 2): tests of the new split rule (Launch's v5.2 route, LaunchV6 in
# the backend); then alone on the GPU: bench gemvq --diag at splits 1-8 on gate/up and down (the
# six forms; one launch and four back to back), bench gemvq --bits 4 (v5.2's auto splits), the
# B = 1 int4 step: main, this branch (v5.2, one CTA an SM's splits), with
# BITDECODE_GEMVQ_FULL_WAVE=1 (v5.2 at v5.1's splits), with BITDECODE_GEMVQ_TILED=1 (v6.1),
# alternated twice. Run from the repo root with .gpu-gemvq2/ carried (bundle.tar.xz, build.sh).
set -o pipefail
cd .gpu-gemvq2; R=$OUT/r; mkdir -p $R; cp run.sh $R/call2.sh
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode bitdecode-main *.test; cp commit $R/
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" t=$SECONDS $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $R/times.txt
tst() { # name binary regexp
  (timeout 170 ./$2 -test.v -test.timeout 165s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) &
}
tst kref kernels.test '^(TestGEMVQMatchesReference|TestGEMVQ52MatchesV51)$'
tst backend backend.test '^(TestQuantLinear|TestQuantLinearTiled)$'
wait; t tests; snap
grep -hE "^(--- |ok|FAIL|PASS|rc=)" $R/kref.log $R/backend.log
run() { # name seconds command args...
  local n=$1 s=$2; shift 2
  timeout $s "$@" > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log; t $n; snap
}
run diag 120 ./bitdecode bench gemvq --diag --shapes gate/up,down --splits 1,2,4,8
run gemvq 60 ./bitdecode bench gemvq --bits 4 --shapes "gate/up,down,q/o proj"
M="bench model --ctx 1k,32k --kv int4 --weights int4 --batch 1 --steps 32 --no-linears"
for i in 1 2; do
  run model_main_$i 60 ./bitdecode-main $M
  run model_new_$i 60 ./bitdecode $M
  run model_full_$i 60 env BITDECODE_GEMVQ_FULL_WAVE=1 ./bitdecode $M
  run model_tiled_$i 60 env BITDECODE_GEMVQ_TILED=1 ./bitdecode $M
done
t end; snap
grep -E "x1 |x4 early=true" $R/diag.log | grep -vE "loads" | cut -c12- | cut -c1-95
grep -E "gemvq v(5|7) .*int4" $R/gemvq.log | cut -c1-120
grep -hE "ms/step" $R/model_*.log
cat $R/times.txt
