#!/bin/bash
# all.sh SRCDIR TAG [VER=125|118]: the four formats' registers and spills
# (NVRTC/ptxas 12.5: Debian experimental libnvrtc12, libnvrtc-builtins12.5, nvidia-cuda-toolkit 12.5.40
# unpacked with dpkg -x under /tmp/aptsid/x125; 11.8: session 13's /tmp/nvrtc). Output: $OUTD (default /tmp/s14/out).
VER=${VER:-125}
if [ $VER = 125 ]; then export NVLIB=/tmp/aptsid/x125/usr/lib/x86_64-linux-gnu/libnvrtc.so.12.5.40 TK=/tmp/aptsid/x125/usr/bin LD_LIBRARY_PATH=/tmp/aptsid/x125/usr/lib/x86_64-linux-gnu
else export NVLIB=/tmp/nvrtc/root/usr/lib/x86_64-linux-gnu/libnvrtc.so.11.8.89 TK=/tmp/nvrtc/tk/usr/bin LD_LIBRARY_PATH=/tmp/nvrtc/root/usr/lib/x86_64-linux-gnu ARCH=--gpu-architecture=compute_90 SM=sm_90; fi
declare -A E=( [int2]="mma::decode_mma<128, 2, 2, true, 1, 1, 8, false, 0, 1, true, false>" [k4v2]="mma::decode_mma<128, 4, 2, true, 1, 1, 4, false, 0, 1, true, false>" [int4kc]="mma::decode_mma<128, 4, 4, true, 1, 1, 4, false, 0, 1, true, false>" [int4kt]="mma::decode_mma<128, 4, 4, false, 1, 1, 4, false, 0, 1, true, false>" )
for f in ${FMTS:-int2 k4v2 int4kc}; do
  echo "== $f $(python3 "$(dirname "$0")/nvc.py" $1/decode_mma.cu ${OUTD:-/tmp/s14/out}/$2_${VER}_$f "${E[$f]}" 2>&1 | grep -E "Used|spill|FAIL|error" | sed 's/ptxas info    : //' | tr '\n' ' ')"
done
