#!/bin/bash
# Session 5 call 5 (final v2.6 kernels): SDPA anchor + the whole grid (--kernel auto); racecheck of every kernel but
# decode_wgmma, and of decode_wgmma alone with the SASS of its cubins (to name the racing instructions); mma vs wgmma
# side by side for the formats auto gives to mma.
# carry: [".gpu/s5", ".gpu/m5"]
cd "$(dirname "$0")"
S=$(pwd)
xz -d -k -f bitdecode.xz engine.test.xz; chmod +x bitdecode engine.test
R=$OUT/r; mkdir -p $R/cubins
export BITDECODE_GOCODER_DIR=$(cd ../m5 && pwd)
T() { local want=$1; shift; local left=$((585 - SECONDS)); [ $left -lt 10 ] && { echo "skipped: $*" >> $R/skipped.txt; return; }; timeout $(( want < left ? want : left )) "$@"; }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv > $R/gpu.txt 2>&1
cd ../..
T 100 python3 bench/anchors/sdpa_decode.py --json $R/sdpa.json > $R/sdpa.log 2>&1; echo "rc=$?" >> $R/sdpa.log
T 250 $S/bitdecode bench attn --device cuda --kernel auto --kv fp16,bf16,int8,int4,int4:kt128,int2,k4v2 --anchor $R/sdpa.json --json $R/gpu_attn.json > $R/gpu_attn.md 2> $R/gpu_attn.log; echo "rc=$?" >> $R/gpu_attn.log
cd $S
T 120 compute-sanitizer --tool racecheck --kernel-name-exclude kns=decode_wgmma ./engine.test -test.run '^TestGPUCacheMatchesReference$|^TestGPUCacheBatchInvariant$' -test.v > $R/racecheck_no_wgmma.txt 2>&1; echo "rc=$?" >> $R/racecheck_no_wgmma.txt
for s in fp16 int8 int4:kt128; do
  BITDECODE_CACHE_DIR=$R/cubins T 40 compute-sanitizer --tool racecheck --kernel-name kns=decode_wgmma ./engine.test -test.run "^TestGPUCacheMatchesReference\$/^$s\$" -test.v > $R/racecheck_wgmma_${s/:/_}.txt 2>&1; echo "rc=$?" >> $R/racecheck_wgmma_${s/:/_}.txt
done
python3 - <<'P' > $R/sass.log 2>&1
import glob, os, subprocess
R = os.environ['OUT'] + '/r/cubins'
for f in glob.glob(R + '/*.bdk'):
    d = open(f, 'rb').read()
    if b'decode_wgmma' not in d:
        continue
    c = f[:-4] + '.cubin'
    open(c, 'wb').write(d[d.find(b'\x7fELF'):])
    r = subprocess.run(['cuobjdump', '-sass', c], capture_output=True, text=True)
    open(f[:-4] + '.sass', 'w').write(r.stdout + r.stderr)
    print(f, len(r.stdout))
P
rm -f $R/cubins/*.bdk $R/cubins/*.cubin
T 70 ./bitdecode bench attn --device cuda --kernel mma,wgmma --kv int4,int2,k4v2 --grid 1x8192,16x32768,128x8192 --json $R/side.json > $R/side.md 2> $R/side.log; echo "rc=$?" >> $R/side.log
echo "elapsed $SECONDS s" > $R/elapsed.txt
tar czf $OUT/r.tgz -C $OUT r && rm -rf $R
