#!/bin/bash
# Session 5 call 2: decode_mma register caps (MINB) x tile groups (MT); wgmma int8 MINB=2 vs mma at 1 x 128K; tests of v2.6.
cd "$(dirname "$0")"
xz -d -k -f bitdecode.xz gpu_kernels.test.xz; chmod +x bitdecode gpu_kernels.test
R=$OUT/r; mkdir -p $R
G=1x8192,16x32768,128x8192
sw() { name=$1; k=$2; kv=$3; shift 3
  env BITDECODE_PTXAS_VERBOSE=1 "$@" timeout 60 ./bitdecode bench attn --device cuda --kernel $k --kv $kv --grid $G > $R/$name.md 2> $R/$name.log; echo "rc=$?" >> $R/$name.log; }
for c in 1:8 3:8 3:4 4:4; do sw mma_int2_b${c/:/_mt} mma int2 BITDECODE_DECODE_MINB=${c%:*} BITDECODE_DECODE_MT=${c#*:}; done
for c in 1:4 3:4 3:2 4:2; do sw mma_int4_b${c/:/_mt} mma int4 BITDECODE_DECODE_MINB=${c%:*} BITDECODE_DECODE_MT=${c#*:}; done
for c in 1:4 3:4 4:2; do sw mma_int4kt_b${c/:/_mt} mma int4:kt128 BITDECODE_DECODE_MINB=${c%:*} BITDECODE_DECODE_MT=${c#*:}; done
for c in 1:4 3:4 4:2; do sw mma_k4v2_b${c/:/_mt} mma k4v2 BITDECODE_DECODE_MINB=${c%:*} BITDECODE_DECODE_MT=${c#*:}; done
sw wgmma_kc_int2_b2 wgmma int4,int2 BITDECODE_WGMMA_MINB=2
G=1x8192,1x131072 sw int8_long mma,wgmma int8
timeout 330 ./gpu_kernels.test -test.run 'TestGPUDecodeMatchesReference/(mma|wgmma)' -test.v > $R/test_decode.log 2>&1; echo "rc=$?" >> $R/test_decode.log
tar czf $OUT/r.tgz -C $OUT r && rm -rf $R
