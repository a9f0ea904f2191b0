# Local NVRTC 12.5 compile of a gpu/kernels program to a cubin for sm_90a, then
# cuobjdump -res-usage.  usage: nvc.py MAIN.cu OUT.cubin [HEADER.cu ...] [-DX=1 ...] [+expr ...]
import ctypes, sys, os, subprocess
L='/tmp/aptsid/x125/usr/lib/x86_64-linux-gnu/'
ctypes.CDLL(L+'libnvrtc-builtins.so.12.5', mode=ctypes.RTLD_GLOBAL)
n=ctypes.CDLL(L+'libnvrtc.so.12')
K='gpu/kernels/'
main=sys.argv[1]; out=sys.argv[2]
rest=sys.argv[3:]
defs=[a for a in rest if a.startswith('-')]
exprs=[a[1:] for a in rest if a.startswith('+')]
hdrs=['bitdecode.cuh']+[a for a in rest if not a.startswith('-') and not a.startswith('+')]
src=open(K+main).read().encode()
hs=[open(K+h).read().encode() for h in hdrs]
prog=ctypes.c_void_p()
H=(ctypes.c_char_p*len(hs))(*hs); HN=(ctypes.c_char_p*len(hs))(*[h.encode() for h in hdrs])
r=n.nvrtcCreateProgram(ctypes.byref(prog), src, main.encode(), len(hs), H, HN); assert r==0, r
for e in exprs: assert n.nvrtcAddNameExpression(prog, e.encode())==0
opts=[b'--gpu-architecture=sm_90a', b'-std=c++17', b'-default-device']+[d.encode() for d in defs]
O=(ctypes.c_char_p*len(opts))(*opts)
r=n.nvrtcCompileProgram(prog, len(opts), O)
sz=ctypes.c_size_t(); n.nvrtcGetProgramLogSize(prog, ctypes.byref(sz)); log=ctypes.create_string_buffer(sz.value); n.nvrtcGetProgramLog(prog, log)
print('compile rc', r); print(log.value.decode()[:6000])
if r==0:
    n.nvrtcGetCUBINSize(prog, ctypes.byref(sz)); b=ctypes.create_string_buffer(sz.value); n.nvrtcGetCUBIN(prog, b)
    open(out,'wb').write(b.raw)
    for e in exprs:
        p=ctypes.c_char_p(); n.nvrtcGetLoweredName(prog, e.encode(), ctypes.byref(p)); print(e, p.value.decode())
