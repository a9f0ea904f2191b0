# nvc13.py LIB SRC_DIR OUT EXPR: the device's NVRTC (CUDA 13) compile of decode_mma.cu for one name
# expression to an sm_90a cubin (XOPT: extra options), ptxas -v through NVRTC; SASS by cuobjdump.
import ctypes, sys, subprocess, os
n=ctypes.CDLL(sys.argv[1])
d=sys.argv[2]; out=sys.argv[3]; e=sys.argv[4]
src=open(d+'/decode_mma.cu').read().encode()
hs=(ctypes.c_char_p*1)(open(d+'/bitdecode.cuh').read().encode()); hn=(ctypes.c_char_p*1)(b'bitdecode.cuh')
prog=ctypes.c_void_p()
assert n.nvrtcCreateProgram(ctypes.byref(prog), src, b'decode_mma.cu', 1, hs, hn)==0
assert n.nvrtcAddNameExpression(prog, e.encode())==0
opts=[b'--gpu-architecture=sm_90a', b'-std=c++17', b'-default-device', b'--ptxas-options=-v']+[o.encode() for o in os.environ.get('XOPT','').split()]
O=(ctypes.c_char_p*len(opts))(*opts)
r=n.nvrtcCompileProgram(prog, len(opts), O)
sz=ctypes.c_size_t(); n.nvrtcGetProgramLogSize(prog, ctypes.byref(sz)); log=ctypes.create_string_buffer(sz.value); n.nvrtcGetProgramLog(prog, log)
for line in log.value.decode().splitlines():
    if 'registers' in line or 'spill' in line or 'error' in line: print(line)
if r!=0: print('COMPILE FAILED', r); sys.exit(1)
n.nvrtcGetCUBINSize(prog, ctypes.byref(sz)); b=ctypes.create_string_buffer(sz.value); n.nvrtcGetCUBIN(prog, b)
open(out+'.cubin','wb').write(b.raw)
s=subprocess.run(['cuobjdump','-sass',out+'.cubin'],capture_output=True,text=True)
open(out+'.sass','w').write(s.stdout)
