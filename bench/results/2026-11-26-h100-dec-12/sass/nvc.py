# Local NVRTC 11.8 compile of gemvq.cu with dec.cu (the fused kernels) to PTX; usage:
#   nvc.py OUT.ptx EXPR [-DX=1 ...]   (run in the worktree root)
import ctypes, sys
L='/tmp/nvrtc/root/usr/lib/x86_64-linux-gnu/'
ctypes.CDLL(L+'libnvrtc-builtins.so.11.8', mode=ctypes.RTLD_GLOBAL)
n=ctypes.CDLL(L+'libnvrtc.so.11.8.89')
out=sys.argv[1]; exprs=[a for a in sys.argv[2:] if not a.startswith('-')]; defs=[a for a in sys.argv[2:] if a.startswith('-')]
import os
src=open(os.environ.get('SRC','gpu/kernels/gemvq.cu')).read().encode()
hs=[open('gpu/kernels/bitdecode.cuh').read().encode(), open('gpu/kernels/dec.cu').read().encode()]
hn=[b'bitdecode.cuh', b'dec.cu']
prog=ctypes.c_void_p()
H=(ctypes.c_char_p*2)(*hs); HN=(ctypes.c_char_p*2)(*hn)
r=n.nvrtcCreateProgram(ctypes.byref(prog), src, b'gemvq_dec.cu', 2, H, HN); assert r==0, r
for e in exprs: assert n.nvrtcAddNameExpression(prog, e.encode())==0
opts=[b'--gpu-architecture=compute_90', b'-std=c++17', b'-default-device', b'-DGEMVQ_WITH_DEC=1', b'-lineinfo']+[d.encode() for d in defs]
O=(ctypes.c_char_p*len(opts))(*opts)
r=n.nvrtcCompileProgram(prog, len(opts), O)
sz=ctypes.c_size_t(); n.nvrtcGetProgramLogSize(prog, ctypes.byref(sz)); log=ctypes.create_string_buffer(sz.value); n.nvrtcGetProgramLog(prog, log)
print('compile rc', r); print(log.value.decode()[:6000])
if r==0:
    n.nvrtcGetPTXSize(prog, ctypes.byref(sz)); b=ctypes.create_string_buffer(sz.value); n.nvrtcGetPTX(prog, b)
    open(out,'wb').write(b.value)
    for e in exprs:
        p=ctypes.c_char_p(); n.nvrtcGetLoweredName(prog, e.encode(), ctypes.byref(p)); print(e, p.value.decode())
