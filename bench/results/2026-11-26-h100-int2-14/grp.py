import re,sys,collections
G=[('K widen (lop3 masks, shift)',lambda o,t: (o=='LOP3.LUT' and re.search(r'0x(3030303|c0c0c0c|f0f0f0f|f0f0f0f0)\b',t)) ),
   ('V unpack (lop3 masks)',lambda o,t: o=='LOP3.LUT' and re.search(r'0x(30003|c000c|3000300|c000c0|f000f|f000f0)\b',t)),
   ('unpack shifts (K 1, V 2 per int2 word)',lambda o,t: o=='SHF.R.U32.HI' and re.search(r'RZ, 0x(4|8), ',t)),
   ('mma (IMMA, HMMA, MOVM)',lambda o,t: o.startswith(('IMMA','HMMA','MOVM'))),
   ('score int32 -> f32 (IMAD/LEA x256, I2FP)',lambda o,t: (o=='IMAD' and '0x100' in t) or (o=='LEA' and t.endswith('0x8')) or o.startswith('I2FP')),
   ('fp32 FFMA/FMUL/FADD',lambda o,t: o in ('FFMA','FMUL','FADD','FADD.FTZ')),
   ('max (FMNMX)',lambda o,t: o=='FMNMX'),
   ('ex2, rcp (MUFU)',lambda o,t: o.startswith('MUFU')),
   ('fp16 <-> f32, byte packs (HADD2.F32, F2FP, PRMT)',lambda o,t: o.startswith(('HADD2','F2FP','PRMT'))),
   ('shuffles, votes',lambda o,t: o.startswith(('SHFL','VOTE'))),
   ('global/shared loads, cp.async, L2 prefetch',lambda o,t: o.startswith(('LDG','LDS','STS','LDGSTS','LDGDEPBAR','DEPBAR','CCTL'))),
   ('spill (LDL, STL)',lambda o,t: o.startswith(('LDL','STL'))),
   ('mask (ISETP.*.OR, FSEL)',lambda o,t: o in ('ISETP.GT.OR','ISETP.LT.OR','FSEL')),
   ('integer, address, loop, control (rest)',lambda o,t: True)]
def cnt(f):
    c=collections.Counter()
    for l in open(f):
        t=l.split(' ',1)[1]; t2=re.sub(r'^@!?U?P\w+ ','',t); o=t2.split()[0]
        for name,fn in G:
            if fn(o,t2): c[name]+=1; break
    return c
fs=sys.argv[1:]
cs=[cnt(f) for f in fs]
print('| per lane, static tile loop (NVRTC 12.5, sm_90a) | '+' | '.join(fs)+' |')
print('|---'*(len(fs)+1)+'|')
for name,_ in G: print('| '+name+' | '+' | '.join(str(c[name]) for c in cs)+' |')
print('| **loop total** | '+' | '.join('**%d**'%sum(c.values()) for c in cs)+' |')
