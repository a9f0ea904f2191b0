# Local NVRTC 12.5 compile of gemvq6dec.cu (headers gemvq4.cu, gemvq.cu, dec.cu, bitdecode.cuh) to an sm_90a cubin.
# usage: python3 nvc6.py OUT.cubin [-DX=1 ...]   (run in the worktree root)
import ctypes, sys, os
L='/tmp/aptsid/x125/usr/lib/x86_64-linux-gnu/'
ctypes.CDLL(L+'libnvrtc-builtins.so.12.5', mode=ctypes.RTLD_GLOBAL)
n=ctypes.CDLL(L+'libnvrtc.so.12')
out=sys.argv[1]
K='gpu/kernels/'
src=open(K+'gemvq6dec.cu').read().encode()
names=['bitdecode.cuh','gemvq4.cu','gemvq.cu','dec.cu']
hs=[open(K+h).read().encode() for h in names]
prog=ctypes.c_void_p()
H=(ctypes.c_char_p*len(hs))(*hs); HN=(ctypes.c_char_p*len(names))(*[h.encode() for h in names])
assert n.nvrtcCreateProgram(ctypes.byref(prog), src, b'gemvq6dec.cu', len(hs), H, HN)==0
for b in (4,3):
    for s in (1,2,4,8):
        for t in ('false','true'):
            assert n.nvrtcAddNameExpression(prog, f'gemvq4::gemv_q6_dec<{b}, {s}, {t}>'.encode())==0
opts=[b'--gpu-architecture=sm_90a', b'-std=c++17', b'-default-device', b'-DDEC_NO_SELFTEST=1']+[a.encode() for a in sys.argv[2:]]
O=(ctypes.c_char_p*len(opts))(*opts)
r=n.nvrtcCompileProgram(prog, len(opts), O)
sz=ctypes.c_size_t(); n.nvrtcGetProgramLogSize(prog, ctypes.byref(sz)); log=ctypes.create_string_buffer(sz.value); n.nvrtcGetProgramLog(prog, log)
print('compile rc', r); print(log.value.decode()[:6000])
if r==0:
    n.nvrtcGetCUBINSize(prog, ctypes.byref(sz)); b=ctypes.create_string_buffer(sz.value); n.nvrtcGetCUBIN(prog, b)
    open(out,'wb').write(b.raw)
