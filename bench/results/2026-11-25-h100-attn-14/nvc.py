# compile decode_mma.cu with NVRTC (NVLIB, TK: its ptxas and cuobjdump) for name expressions, ptxas -v, SASS
import ctypes, sys, subprocess, os
lib = ctypes.CDLL(os.environ['NVLIB'])
tk = os.environ['TK']
src_path = sys.argv[1]; out = sys.argv[2]; exprs = sys.argv[3:]
src = open(src_path).read().encode()
hdr = open(os.path.join(os.path.dirname(src_path), 'bitdecode.cuh')).read().encode()
prog = ctypes.c_void_p()
hs = (ctypes.c_char_p*1)(hdr); hn = (ctypes.c_char_p*1)(b"bitdecode.cuh")
r = lib.nvrtcCreateProgram(ctypes.byref(prog), src, b"decode_mma.cu", 1, hs, hn); assert r == 0
for e in exprs: assert lib.nvrtcAddNameExpression(prog, e.encode()) == 0
opts = [os.environ.get('ARCH','--gpu-architecture=compute_90a').encode(), b"-std=c++17", b"-default-device"] + [o.encode() for o in os.environ.get("XOPT","").split()]
arr = (ctypes.c_char_p * len(opts))(*opts)
r = lib.nvrtcCompileProgram(prog, len(opts), arr)
n = ctypes.c_size_t(); lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n)); log = ctypes.create_string_buffer(n.value); lib.nvrtcGetProgramLog(prog, log)
print(log.value.decode()[-4000:])
if r != 0: print("COMPILE FAILED", r); sys.exit(1)
lib.nvrtcGetPTXSize(prog, ctypes.byref(n)); ptx = ctypes.create_string_buffer(n.value); lib.nvrtcGetPTX(prog, ptx)
open(out+'.ptx','wb').write(ptx.value)
o = subprocess.run([tk+'/ptxas', '-arch='+os.environ.get('SM','sm_90a'), '-v'] + os.environ.get('POPT','').split() + [ out+'.ptx', '-o', out+'.cubin'], capture_output=True, text=True)
for line in (o.stdout + o.stderr).splitlines():
    if 'registers' in line or 'spill' in line or 'error' in line.lower() or 'Compiling' in line: print(line)
s = subprocess.run([tk+'/cuobjdump', '-sass', out+'.cubin'], capture_output=True, text=True)
open(out+'.sass','w').write(s.stdout)
