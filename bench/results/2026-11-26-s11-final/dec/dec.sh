#!/bin/bash
# dec.sh (session 11's second lead call): DEC's step in one process with the residuals on the device
# (as dec-7's call 2), HEAD's bitdecode (bench model collects between weight rows) against 9b3e52c's
# (no collection), alternated twice; first TestGPUPlanesSpecPlans alone.
set -o pipefail
cd .gpu; G=$PWD; R=$OUT/r; mkdir -p $R; cp dec.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode* *.test
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version --format=csv >> $R/times.txt
(timeout 80 ./kernels.test -test.v -test.timeout 80s -test.run '^TestGPUPlanesSpecPlans$' > $R/specplans.log 2>&1; echo "rc=$?" >> $R/specplans.log); t specplans; snap
export BITDECODE_DEC_RESIDUAL=device
for i in 1 2; do for b in bitdecode bitdecode_old; do
  timeout 45 ./$b bench model --ctx 1k --kv int4 --weights int4 --no-linears --steps 16 --dec-k 0,64,0,tuned:5%,0,tuned:5% --dec-settings T4 --json $R/dec_${b}_$i.json > $R/dec_${b}_$i.log 2>&1; echo "rc=$?" >> $R/dec_${b}_$i.log; t dec_${b}_$i; snap
done; done
t end; snap
