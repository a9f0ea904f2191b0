# NVRTC 12.5 compile of DIR/SRC (with DIR/bitdecode.cuh) for sm_90a with name expressions; usage:
#   python3 nvc2.py DIR SRC OUT.cubin EXPRFILE [options...]
import ctypes, sys
L='/tmp/aptsid/x125/usr/lib/x86_64-linux-gnu/'
ctypes.CDLL(L+'libnvrtc-builtins.so.12.5', mode=ctypes.RTLD_GLOBAL)
n=ctypes.CDLL(L+'libnvrtc.so.12')
d,srcn,out,ef=sys.argv[1:5]; extra=[o.encode() for o in sys.argv[5:]]
src=open(d+'/'+srcn).read().encode()
hs=[open(d+'/bitdecode.cuh').read().encode()]; hn=[b'bitdecode.cuh']
prog=ctypes.c_void_p()
H=(ctypes.c_char_p*1)(*hs); HN=(ctypes.c_char_p*1)(*hn)
assert n.nvrtcCreateProgram(ctypes.byref(prog), src, srcn.encode(), 1, H, HN)==0
exprs=[l.strip() for l in open(ef) if l.strip()]
for e in exprs: assert n.nvrtcAddNameExpression(prog, e.encode())==0
opts=[b'--gpu-architecture=sm_90a', b'-std=c++17', b'-default-device', b'--ptxas-options=-v']+extra
O=(ctypes.c_char_p*len(opts))(*opts)
r=n.nvrtcCompileProgram(prog, len(opts), O)
sz=ctypes.c_size_t(); n.nvrtcGetProgramLogSize(prog, ctypes.byref(sz)); log=ctypes.create_string_buffer(sz.value); n.nvrtcGetProgramLog(prog, log)
print('compile rc', r)
open(out+'.log','w').write(log.value.decode())
if r==0:
    n.nvrtcGetCUBINSize(prog, ctypes.byref(sz)); b=ctypes.create_string_buffer(sz.value); n.nvrtcGetCUBIN(prog, b)
    open(out,'wb').write(b.raw)
else: print(log.value.decode()[:4000])
