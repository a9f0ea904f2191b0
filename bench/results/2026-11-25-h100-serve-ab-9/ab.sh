#!/bin/bash
# A/B of gocoder-23m's B = 64 decode step across this session's merges (serving slowed 13.4-14.4K -> 11.0-12.2K tok/s).
set -o pipefail
cd .gpu; R=$OUT/r; mkdir -p $R
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('ab.tar.xz')).extractall('.')
"
chmod +x bd-*
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
nvidia-smi --query-gpu=name --format=csv > $R/gpu.txt; nproc >> $R/gpu.txt
for round in 1 2; do
for c in 7de578c 1e3788f 7117549 91de915 bdc705a; do
  timeout 40 ./bd-$c bench model --preset $PWD/gocoder-23m --ctx 3k,4k --kv fp16,int2 --batch 64 --steps 32 --no-linears > $R/ab_${c}_$round.log 2>&1
  echo "$c $round rc=$?" >> $R/done.txt
  snap
done; done
