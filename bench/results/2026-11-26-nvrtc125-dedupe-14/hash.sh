# hash.sh DIR: the decode_mma.cu and planes.cu programs the Go side compiles (mmaProgram,
# planesProgram at their defaults), default and -DBD_TIMELINE=1 builds, one NVRTC program each
# as the Go side makes them; nvt.py prints code bytes, registers, spills and the .text SHA-1.
set -e
D=$1; N=$(dirname "$0")/../2026-11-26-nvrtc125-dec-14/nvt.py; export LD_LIBRARY_PATH=/tmp/aptsid/x125/usr/lib/x86_64-linux-gnu
mma() { python3 $N $D decode_mma.cu /tmp/dedupe-ptx "mma::decode_mma<$1>" 'decode_combine<128, 8>' "${@:2}"; }
for tl in "" "-DBD_TIMELINE=1 decode_timeline_stamp"; do
  echo "## decode_mma.cu ${tl:-default}"
  mma "128, 4, 4, true, 1, 1, 4, false, 0, 1, true, false" $tl     # int4 (KC)
  mma "128, 4, 4, false, 1, 1, 4, false, 0, 1, true, false" $tl    # int4:kt128
  mma "128, 4, 4, false, 4, 4, 4, false, 0, 1, true, false" $tl    # int4:kt32:v32
  mma "128, 2, 2, true, 1, 1, 8, false, 0, 1, true, false" $tl     # int2
  mma "128, 4, 2, true, 1, 1, 4, false, 0, 1, true, false" $tl     # k4v2
  mma "128, 8, 8, true, 1, 1, 2, false, 0, 1, false, false" $tl    # int8
  mma "128, 16, 16, false, 1, 1, 1, false, 0, 1, false, false" $tl # fp16
  echo "## planes.cu ${tl:-default}"
  for s in "128, false, true, 1, 2, 4, 0, 1" "128, true, false, 1, 2, 4, 0, 1"; do  # bw, bw:bf16:nofilter
    python3 $N $D planes.cu /tmp/dedupe-ptx "planes::split_mma<$s>" 'planes::combine<128, 8>' planes::mass $tl
  done
done
