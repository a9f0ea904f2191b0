# NVRTC 12.5 compile of a gpu/kernels .cu with name expressions to an sm_90a cubin:
#   python3 nvc4.py SRC.cu OUT.cubin EXPR... (run in the worktree root; headers: bitdecode.cuh, gemvq.cu, gemvq4.cu, dec.cu)
import ctypes, sys, os, json
L='/tmp/aptsid/x125/usr/lib/x86_64-linux-gnu/'
ctypes.CDLL(L+'libnvrtc-builtins.so.12.5', mode=ctypes.RTLD_GLOBAL)
n=ctypes.CDLL(L+'libnvrtc.so.12')
srcp, out, exprs = sys.argv[1], sys.argv[2], sys.argv[3:]
src=open(srcp).read().encode()
hn=['bitdecode.cuh','gemvq.cu','gemvq4.cu','dec.cu']
hs=[open('gpu/kernels/'+h).read().encode() for h in hn]
prog=ctypes.c_void_p()
H=(ctypes.c_char_p*len(hs))(*hs); HN=(ctypes.c_char_p*len(hn))(*[h.encode() for h in hn])
assert n.nvrtcCreateProgram(ctypes.byref(prog), src, os.path.basename(srcp).encode(), len(hs), H, HN)==0
for e in exprs: assert n.nvrtcAddNameExpression(prog, e.encode())==0
opts=[b'--gpu-architecture=sm_90a', b'-std=c++17', b'-default-device'] + [o.encode() for o in os.environ.get('OPTS','').split()]
O=(ctypes.c_char_p*len(opts))(*opts)
r=n.nvrtcCompileProgram(prog, len(opts), O)
sz=ctypes.c_size_t(); n.nvrtcGetProgramLogSize(prog, ctypes.byref(sz)); log=ctypes.create_string_buffer(sz.value); n.nvrtcGetProgramLog(prog, log)
print('compile rc', r, file=sys.stderr); print(log.value.decode()[:6000], file=sys.stderr)
if r==0:
    n.nvrtcGetCUBINSize(prog, ctypes.byref(sz)); b=ctypes.create_string_buffer(sz.value); n.nvrtcGetCUBIN(prog, b)
    open(out,'wb').write(b.raw)
    m={}
    for e in exprs:
        p=ctypes.c_char_p(); n.nvrtcGetLoweredName(prog, e.encode(), ctypes.byref(p)); m[e]=p.value.decode()
    json.dump(m, open(out+'.names','w'), indent=1)
