# nvt.py SRC_DIR SRCFILE OUTPREFIX [exprs...] [-D...] [-H=hdr]: NVRTC 12.5 sm_90 (nvc.py's flags + ptxas -v);
# prints per kernel: size, regs, stack, spill st/ld, sha of .text; writes PTX to OUTPREFIX.ptx
import ctypes, sys, struct, os, re, hashlib
lib = ctypes.CDLL("/tmp/aptsid/x125/usr/lib/x86_64-linux-gnu/libnvrtc.so.12")
src_dir, src_file, outp = sys.argv[1], sys.argv[2], sys.argv[3]
args = sys.argv[4:]
exprs = [a for a in args if not a.startswith("-")]
opts = [a for a in args if a.startswith("-") and not a.startswith("-H=")]
extra = [a[3:] for a in args if a.startswith("-H=")]
src = open(os.path.join(src_dir, src_file)).read()
hnames = ["bitdecode.cuh"] + extra
hsrcs = [open(os.path.join(src_dir, h)).read() for h in hnames]
prog = ctypes.c_void_p()
arr = lambda l: (ctypes.c_char_p * len(l))(*[s.encode() for s in l])
assert lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), src_file.encode(), len(hnames), arr(hsrcs), arr(hnames)) == 0
for e in exprs:
    assert lib.nvrtcAddNameExpression(prog, e.encode()) == 0
o = ["-arch=sm_90", "-std=c++17", "-default-device", "-DNOTHING", "--ptxas-options=-v"] + opts
r = lib.nvrtcCompileProgram(prog, len(o), arr(o))
n = ctypes.c_size_t(); lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
log = ctypes.create_string_buffer(n.value); lib.nvrtcGetProgramLog(prog, log); log = log.value.decode()
if r != 0:
    print(log[:20000]); print("COMPILE FAILED", r); sys.exit(1)
names = {}
for e in exprs:
    p = ctypes.c_char_p(); lib.nvrtcGetLoweredName(prog, e.encode(), ctypes.byref(p)); names[p.value.decode()] = e
lib.nvrtcGetPTXSize(prog, ctypes.byref(n)); ptx = ctypes.create_string_buffer(n.value); lib.nvrtcGetPTX(prog, ptx)
open(outp + ".ptx", "w").write(ptx.value.decode())
lib.nvrtcGetCUBINSize(prog, ctypes.byref(n)); cub = ctypes.create_string_buffer(n.value); lib.nvrtcGetCUBIN(prog, cub)
b = cub.raw
shoff, = struct.unpack_from("<Q", b, 0x28); shentsize, shnum, shstrndx = struct.unpack_from("<HHH", b, 0x3A)
secs = [struct.unpack_from("<IIQQQQIIQQ", b, shoff + i * shentsize) for i in range(shnum)]
stro = secs[shstrndx][4]
def nm(o):
    e = b.index(b"\0", stro + o); return b[stro + o:e].decode()
text = {}
for s in secs:
    name = nm(s[0])
    if name.startswith(".text."):
        text[name[6:]] = (s[5], hashlib.sha1(b[s[4]:s[4]+s[5]]).hexdigest()[:10])
# ptxas -v per function
info = {}
cur = None
for line in log.splitlines():
    m = re.search(r"Function properties for (\S+)", line)
    if m: cur = m.group(1); continue
    m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
    if m and cur: info.setdefault(cur, {}).update(stack=int(m.group(1)), st=int(m.group(2)), ld=int(m.group(3))); continue
    m = re.search(r"Compiling entry function '(\S+)'", line)
    if m: cur = m.group(1); continue
    m = re.search(r"Used (\d+) registers", line)
    if m and cur: info.setdefault(cur, {})["regs"] = int(m.group(1))
for low, e in sorted(names.items(), key=lambda kv: kv[1]):
    sz, h = text.get(low, (0, "-"))
    i = info.get(low, {})
    print("%-36s size %6d regs %3s stack %3s spill %s/%s text %s" % (e, sz, i.get("regs"), i.get("stack"), i.get("st"), i.get("ld"), h))
