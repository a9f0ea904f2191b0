# Local NVRTC 12.5 compile of a decode .cu (with bitdecode.cuh) to an sm_90a cubin with name expressions.
# usage: SRC=gpu/kernels/decode_mma.cu python3 nvc.py OUT.cubin EXPR... (run in the worktree root)
import ctypes, sys, os
L='/tmp/aptsid/x125/usr/lib/x86_64-linux-gnu/'
ctypes.CDLL(L+'libnvrtc-builtins.so.12.5', mode=ctypes.RTLD_GLOBAL)
n=ctypes.CDLL(L+'libnvrtc.so.12')
out=sys.argv[1]; exprs=sys.argv[2:]
srcname=os.environ['SRC']
src=open(srcname).read().encode()
hs=[open('gpu/kernels/bitdecode.cuh').read().encode()]; hn=[b'bitdecode.cuh']
prog=ctypes.c_void_p()
H=(ctypes.c_char_p*1)(*hs); HN=(ctypes.c_char_p*1)(*hn)
assert n.nvrtcCreateProgram(ctypes.byref(prog), src, os.path.basename(srcname).encode(), 1, H, HN)==0
for e in exprs: assert n.nvrtcAddNameExpression(prog, e.encode())==0
opts=[b'--gpu-architecture=sm_90a', b'-std=c++17', b'-default-device', b'--ptxas-options=-v']
O=(ctypes.c_char_p*len(opts))(*opts)
r=n.nvrtcCompileProgram(prog, len(opts), O)
sz=ctypes.c_size_t(); n.nvrtcGetProgramLogSize(prog, ctypes.byref(sz)); log=ctypes.create_string_buffer(sz.value); n.nvrtcGetProgramLog(prog, log)
print('compile rc', r); print(log.value.decode()[:8000])
if r==0:
    n.nvrtcGetCUBINSize(prog, ctypes.byref(sz)); b=ctypes.create_string_buffer(sz.value); n.nvrtcGetCUBIN(prog, b)
    open(out,'wb').write(b.raw)
