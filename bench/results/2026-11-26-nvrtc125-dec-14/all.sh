# all.sh DIR TAG: every instantiation the Go side compiles of gemvq3.cu (loadV3, compileGEMVQ3DEC per bits)
set -e
D=$1; T=$2; export LD_LIBRARY_PATH=/tmp/aptsid/x125/usr/lib/x86_64-linux-gnu
ex=(); for t in 1 2; do for b in 3 4 8; do for s in 1 2 4; do ex+=("gemvq3::gemv_q3<$t, $b, $s>"); done; done; done
python3 "$(dirname "$0")"/nvt.py $D gemvq3.cu /tmp/$T.v3 "${ex[@]}" -H=gemvq.cu
for b in 3 4 8; do
  ex=("gemvq3::gemv_q3<1, $b, 1>"); for s in 1 2 4; do for p in 4 32; do ex+=("gemvq3::gemv_q3_dec<$b, $s, $p>"); done; done
  python3 "$(dirname "$0")"/nvt.py $D gemvq3.cu /tmp/$T.dec$b "${ex[@]}" -H=gemvq.cu -H=dec.cu -DGEMVQ_WITH_DEC=1 -DDEC_NO_SELFTEST=1
done
