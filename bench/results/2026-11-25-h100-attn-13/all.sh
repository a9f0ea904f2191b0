#!/bin/bash
# all.sh SRCDIR TAG: the four formats' registers and loops
export LD_LIBRARY_PATH=/tmp/nvrtc/root/usr/lib/x86_64-linux-gnu
declare -A E=( [int2]="mma::decode_mma<128, 2, 2, true, 1, 1, 8, false, 0, 1, true, false>" [k4v2]="mma::decode_mma<128, 4, 2, true, 1, 1, 4, false, 0, 1, true, false>" [int4kc]="mma::decode_mma<128, 4, 4, true, 1, 1, 4, false, 0, 1, true, false>" [int4kt]="mma::decode_mma<128, 4, 4, false, 1, 1, 4, false, 0, 1, true, false>" )
for f in int2 k4v2 int4kc int4kt; do
  echo "== $f"
  python3 /tmp/i2b/nvc.py $1/decode_mma.cu /tmp/i2b/$2_$f "${E[$f]}" 2>&1 | grep -E "Used|spill" | sed 's/ptxas info    : //'
  python3 /tmp/i2b/loops.py /tmp/i2b/$2_$f.sass 2>/dev/null | sed -n 2p | cut -c1-400
done
