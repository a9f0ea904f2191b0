#!/usr/bin/env python3
"""Generates unorm_tables.go: the Unicode data behind NFC/NFD/NFKC/NFKD.

Run from this directory: python3 gen_unorm.py && gofmt -w unorm_tables.go
The data comes from Python's unicodedata module (its Unicode version is
recorded in the output). Go has no normalization in its standard library and
golang.org/x/text is not a dependency of this module, so the four tables the
algorithm needs are generated here:
  - canonical combining classes (non-zero only), as ranges;
  - one-level decompositions, canonical and compatibility;
  - primary composites (pairs that NFC recomposes).
Hangul syllables are handled algorithmically in unorm.go.
"""
import json
import sys
import unicodedata

# The reference (HF tokenizers) normalizes with the
# unicode-normalization-alignments crate, whose tables are older than
# Python's: it lacks the decompositions and combining classes of characters
# added since. The tables leave those out so that NFC, NFD, NFKC and NFKD
# give what the reference gives. The lists come from gen_unorm_ref.js:
#   python3 gen_unorm.py --reference FILE   # prints them
REFERENCE_LACKS_DECOMP = [
    0x32FF, 0xA7F2, 0xA7F3, 0xA7F4, 0xAB69, 0x10781, 0x10782, 0x10783, 0x10784, 0x10785, 0x10787,
    0x10788, 0x10789, 0x1078A, 0x1078B, 0x1078C, 0x1078D, 0x1078E, 0x1078F, 0x10790, 0x10791,
    0x10792, 0x10793, 0x10794, 0x10795, 0x10796, 0x10797, 0x10798, 0x10799, 0x1079A, 0x1079B,
    0x1079C, 0x1079D, 0x1079E, 0x1079F, 0x107A0, 0x107A1, 0x107A2, 0x107A3, 0x107A4, 0x107A5,
    0x107A6, 0x107A7, 0x107A8, 0x107A9, 0x107AA, 0x107AB, 0x107AC, 0x107AD, 0x107AE, 0x107AF,
    0x107B0, 0x107B2, 0x107B3, 0x107B4, 0x107B5, 0x107B6, 0x107B7, 0x107B8, 0x107B9, 0x107BA,
    0x11938, 0x1F16C, 0x1FBF0, 0x1FBF1, 0x1FBF2, 0x1FBF3, 0x1FBF4, 0x1FBF5, 0x1FBF6, 0x1FBF7,
    0x1FBF8, 0x1FBF9,
]
# Ranges [lo, hi] of code points that are combining marks (Mn, Mc, Me) for
# Python and not for the reference's crate, which StripAccents removes, and
# the reverse.
REFERENCE_LACKS_MARK = [
    [0x07FD, 0x07FD], [0x0898, 0x089F], [0x08CA, 0x08D3], [0x09FE, 0x09FE], [0x0AFA, 0x0AFF],
    [0x0B55, 0x0B55], [0x0C04, 0x0C04], [0x0C3C, 0x0C3C], [0x0D00, 0x0D00], [0x0D3B, 0x0D3C],
    [0x0D81, 0x0D81], [0x0EBA, 0x0EBA], [0x1715, 0x1715], [0x180F, 0x180F], [0x1ABF, 0x1ACE],
    [0x1CF7, 0x1CF7], [0x1DF6, 0x1DFA], [0xA82C, 0xA82C], [0xA8FF, 0xA8FF], [0x10D24, 0x10D27],
    [0x10EAB, 0x10EAC], [0x10F46, 0x10F50], [0x10F82, 0x10F85], [0x11070, 0x11070],
    [0x11073, 0x11074], [0x110C2, 0x110C2], [0x11145, 0x11146], [0x111C9, 0x111C9],
    [0x111CE, 0x111CF], [0x1133B, 0x1133B], [0x1145E, 0x1145E], [0x1182C, 0x1183A],
    [0x11930, 0x11935], [0x11937, 0x11938], [0x1193B, 0x1193E], [0x11940, 0x11940],
    [0x11942, 0x11943], [0x119D1, 0x119D7], [0x119DA, 0x119E0], [0x119E4, 0x119E4],
    [0x11A01, 0x11A0A], [0x11A33, 0x11A39], [0x11A3B, 0x11A3E], [0x11A47, 0x11A47],
    [0x11A51, 0x11A5B], [0x11A8A, 0x11A99], [0x11D31, 0x11D36], [0x11D3A, 0x11D3A],
    [0x11D3C, 0x11D3D], [0x11D3F, 0x11D45], [0x11D47, 0x11D47], [0x11D8A, 0x11D8E],
    [0x11D90, 0x11D91], [0x11D93, 0x11D97], [0x11EF3, 0x11EF6], [0x16F4F, 0x16F4F],
    [0x16F7F, 0x16F87], [0x16FE4, 0x16FE4], [0x16FF0, 0x16FF1], [0x1CF00, 0x1CF2D],
    [0x1CF30, 0x1CF46], [0x1E130, 0x1E136], [0x1E2AE, 0x1E2AE], [0x1E2EC, 0x1E2EF],
]
REFERENCE_EXTRA_MARK = [
    [0x1CF2, 0x1CF3],
]
REFERENCE_LACKS_CCC = [
    0x07FD, 0x0898, 0x0899, 0x089A, 0x089B, 0x089C, 0x089D, 0x089E, 0x089F, 0x08CA, 0x08CB, 0x08CC,
    0x08CD, 0x08CE, 0x08CF, 0x08D0, 0x08D1, 0x08D2, 0x08D3, 0x09FE, 0x0C3C, 0x0D3B, 0x0D3C, 0x0EBA,
    0x1715, 0x1ABF, 0x1AC0, 0x1AC1, 0x1AC2, 0x1AC3, 0x1AC4, 0x1AC5, 0x1AC6, 0x1AC7, 0x1AC8, 0x1AC9,
    0x1ACA, 0x1ACB, 0x1ACC, 0x1ACD, 0x1ACE, 0x1DF6, 0x1DF7, 0x1DF8, 0x1DF9, 0x1DFA, 0xA82C, 0x10D24,
    0x10D25, 0x10D26, 0x10D27, 0x10EAB, 0x10EAC, 0x10F46, 0x10F47, 0x10F48, 0x10F49, 0x10F4A,
    0x10F4B, 0x10F4C, 0x10F4D, 0x10F4E, 0x10F4F, 0x10F50, 0x10F82, 0x10F83, 0x10F84, 0x10F85,
    0x11070, 0x1133B, 0x1145E, 0x11839, 0x1183A, 0x1193D, 0x1193E, 0x11943, 0x119E0, 0x11A34,
    0x11A47, 0x11A99, 0x11D42, 0x11D44, 0x11D45, 0x11D97, 0x16FF0, 0x16FF1, 0x1E130, 0x1E131,
    0x1E132, 0x1E133, 0x1E134, 0x1E135, 0x1E136, 0x1E2AE, 0x1E2EC, 0x1E2ED, 0x1E2EE, 0x1E2EF,
]

def is_hangul(cp):
    return 0xAC00 <= cp <= 0xD7A3

def is_mark(cp):
    return unicodedata.category(chr(cp)) in ('Mn', 'Mc', 'Me')

def ranges(cps):
    out = []
    for c in sorted(cps):
        if out and out[-1][1] == c - 1:
            out[-1][1] = c
        else:
            out.append([c, c])
    return out

def in_ranges(cp, rs):
    return any(lo <= cp <= hi for lo, hi in rs)

def probe(form, cp):
    """The strings gen_unorm_ref.js normalizes for cp."""
    ch = chr(cp)
    if form == 'ccc':
        return (unicodedata.normalize('NFD', 'a' + ch + '\u0334'),
                unicodedata.normalize('NFD', 'a\u0301' + ch), unicodedata.normalize('NFD', ch))
    return unicodedata.normalize(form.upper(), ch)

if len(sys.argv) == 3 and sys.argv[1] == '--reference':
    ref = json.load(open(sys.argv[2]))
    lacks_decomp, lacks_ccc, other = set(), [], []
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF or cp == 10:
            continue
        ch = chr(cp)
        for form in ('nfd', 'nfkd'):
            mine = probe(form, cp)
            theirs = ''.join(map(chr, ref[form].get(str(cp), [cp])))
            if mine != theirs:
                if theirs == ch:
                    lacks_decomp.add(cp)
                else:
                    other.append((form, cp))
        low, high, alone = probe('ccc', cp)
        if (low != 'a' + alone + '\u0334' or high != 'a\u0301' + alone) != (cp in set(ref['ccc'])):
            if unicodedata.combining(ch) and cp not in ref['ccc']:
                lacks_ccc.append(cp)
            else:
                other.append(('ccc', cp))
    marks = set(ref['marks'])
    mine = set(c for c in range(0x110000) if not (0xD800 <= c <= 0xDFFF or c == 10) and is_mark(c))
    print('REFERENCE_LACKS_MARK =', ['[0x%04X, 0x%04X]' % tuple(r) for r in ranges(mine - marks)])
    print('REFERENCE_EXTRA_MARK =', ['[0x%04X, 0x%04X]' % tuple(r) for r in ranges(marks - mine)])
    print('REFERENCE_LACKS_DECOMP =', ['0x%04X' % c for c in sorted(lacks_decomp)])
    print('REFERENCE_LACKS_CCC =', ['0x%04X' % c for c in lacks_ccc])
    print('differences of another kind:', other)
    sys.exit(0)
lacks_decomp, lacks_ccc = set(REFERENCE_LACKS_DECOMP), set(REFERENCE_LACKS_CCC)

ccc_ranges = []
decomp = []      # (cp, compat, [cps])
compose = []     # (a, b, cp)
for cp in range(0x110000):
    if 0xD800 <= cp <= 0xDFFF:
        continue
    ch = chr(cp)
    c = unicodedata.combining(ch)
    if c and cp not in lacks_ccc:
        if ccc_ranges and ccc_ranges[-1][1] == cp - 1 and ccc_ranges[-1][2] == c:
            ccc_ranges[-1][1] = cp
        else:
            ccc_ranges.append([cp, cp, c])
    if is_hangul(cp):
        continue
    d = unicodedata.decomposition(ch)
    if not d or cp in lacks_decomp:
        continue
    parts = d.split()
    compat = parts[0].startswith('<')
    if compat:
        parts = parts[1:]
    seq = [int(p, 16) for p in parts]
    decomp.append((cp, compat, seq))
    if not compat and len(seq) == 2:
        # A primary composite: recomposed by NFC unless excluded.
        if unicodedata.normalize('NFC', chr(seq[0]) + chr(seq[1])) == ch:
            compose.append((seq[0], seq[1], cp))

def gostr(seq):
    return '"' + ''.join('\\U%08X' % c if c > 0xFFFF else '\\u%04X' % c for c in seq) + '"'

out = []
out.append('// Code generated by gen_unorm.py from Python unicodedata (Unicode %s), less the data' % unicodedata.unidata_version)
out.append('// the reference lacks (REFERENCE_LACKS_DECOMP, REFERENCE_LACKS_CCC); DO NOT EDIT.')
out.append('')
out.append('package tokenizer')
out.append('')
out.append('// unormVersion is the Unicode version of the normalization tables.')
out.append('const unormVersion = "%s"' % unicodedata.unidata_version)
out.append('')
out.append('// cccRanges lists the non-zero canonical combining classes: [lo, hi, class].')
out.append('var cccRanges = [...][3]int32{')
for lo, hi, c in ccc_ranges:
    out.append('\t{0x%04X, 0x%04X, %d},' % (lo, hi, c))
out.append('}')
out.append('')
out.append('// decompositions lists one-level decompositions; compat marks <tagged> ones.')
out.append('var decompositions = [...]struct {')
out.append('\tr      rune')
out.append('\tcompat bool')
out.append('\td      string')
out.append('}{')
for cp, compat, seq in decomp:
    out.append('\t{0x%04X, %s, %s},' % (cp, 'true' if compat else 'false', gostr(seq)))
out.append('}')
out.append('')
marks = [c for c in range(0x110000) if not (0xD800 <= c <= 0xDFFF)
         and ((is_mark(c) and not in_ranges(c, REFERENCE_LACKS_MARK)) or in_ranges(c, REFERENCE_EXTRA_MARK))]
out.append('// combiningMarks lists, as [lo, hi] ranges, the code points StripAccents removes: the')
out.append('// reference\'s combining marks.')
out.append('var combiningMarks = [...][2]rune{')
for lo, hi in ranges(marks):
    out.append('\t{0x%04X, 0x%04X},' % (lo, hi))
out.append('}')
out.append('')
out.append('// compositions lists the primary composites: [first, second, composite].')
out.append('var compositions = [...][3]rune{')
for a, b, cp in compose:
    out.append('\t{0x%04X, 0x%04X, 0x%04X},' % (a, b, cp))
out.append('}')
open('unorm_tables.go', 'w').write('\n'.join(out) + '\n')
print('ccc ranges %d, decompositions %d, compositions %d' % (len(ccc_ranges), len(decomp), len(compose)), file=sys.stderr)
