# NVRTC 12.5 (local) compile of ops.cu to an sm_90a cubin and its SASS. usage: python3 nvc_ops.py SRC_DIR OUT
import ctypes, sys, subprocess
L='/tmp/aptsid/x125/usr/lib/x86_64-linux-gnu/'
ctypes.CDLL(L+'libnvrtc-builtins.so.12.5', mode=ctypes.RTLD_GLOBAL)
n=ctypes.CDLL(L+'libnvrtc.so.12')
d=sys.argv[1]; out=sys.argv[2]
src=open(d+'/ops.cu').read().encode()
hs=(ctypes.c_char_p*1)(open(d+'/bitdecode.cuh').read().encode()); hn=(ctypes.c_char_p*1)(b'bitdecode.cuh')
prog=ctypes.c_void_p()
assert n.nvrtcCreateProgram(ctypes.byref(prog), src, b'ops.cu', 1, hs, hn)==0
opts=[b'--gpu-architecture=sm_90a', b'-std=c++17', b'-default-device', b'--ptxas-options=-v']
O=(ctypes.c_char_p*len(opts))(*opts)
r=n.nvrtcCompileProgram(prog, len(opts), O)
sz=ctypes.c_size_t(); n.nvrtcGetProgramLogSize(prog, ctypes.byref(sz)); log=ctypes.create_string_buffer(sz.value); n.nvrtcGetProgramLog(prog, log)
if r!=0: print('COMPILE FAILED', r); print(log.value.decode()[:3000]); sys.exit(1)
n.nvrtcGetCUBINSize(prog, ctypes.byref(sz)); b=ctypes.create_string_buffer(sz.value); n.nvrtcGetCUBIN(prog, b)
open(out+'.cubin','wb').write(b.raw)
s=subprocess.run(['/tmp/aptsid/x125/usr/bin/cuobjdump','-sass',out+'.cubin'],capture_output=True,text=True)
open(out+'.sass','w').write(s.stdout)
