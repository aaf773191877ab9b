#!/usr/bin/env python3
"""Compares the machine code of each kernel in two cubins (per-kernel .text.<mangled name> ELF sections).

For device-code refactors checked without a GPU: build the touched .cu before and after,
  nvcc -std=c++17 -gencode=arch=compute_90a,code=sm_90a -O3 -cubin -I src F.cu -o old.cubin   (git stash for "before")
and run `scripts/cubin_text_cmp.py old.cubin new.cubin`. Compile both from the same path: kernels in an anonymous
namespace carry a hash of the file name in their mangled names. A kernel of the old cubin is paired with the new one of the
same name or, when the change appended template arguments defaulting to false / 0 (a new opt-in variant), of that
name with them. Prints SAME / DIFF / MISSING per old kernel and the new kernels nobody paired; exit status 1 on any
DIFF or MISSING.
"""
import re
import struct
import sys


def text_sections(path):
    data = open(path, "rb").read()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        sys.exit(f"{path}: not a 64-bit ELF file")
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names_at = headers[shstrndx][4]
    out = {}
    for name_off, _type, _flags, _addr, offset, size, *_ in headers:
        end = data.index(b"\0", names_at + name_off)
        name = data[names_at + name_off:end].decode()
        if name.startswith(".text."):
            out[name[len(".text."):]] = data[offset:offset + size]
    return out


# Trailing template arguments a change may append with their defaults: bool false (Lb0E) or int 0 (Li0E).
_DEFAULT_TAIL = re.compile(r"(?:ELb0|ELi0)+(?=EE)")


def base_name(name):
    """The name with default-valued template arguments appended at the end of a template list removed."""
    return _DEFAULT_TAIL.sub("", name)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    old, new = text_sections(sys.argv[1]), text_sections(sys.argv[2])
    by_base = {}
    for name in new:
        by_base.setdefault(base_name(name), []).append(name)
    paired, bad = set(), 0
    for name, code in sorted(old.items()):
        # One template has one arity in a cubin, so a base name stands for at most one kernel on each side.
        match = name if name in new else next(iter(by_base.get(base_name(name), [])), None)
        if match is None:
            print(f"MISSING {name}")
            bad += 1
            continue
        paired.add(match)
        same = new[match] == code
        bad += not same
        print(f"{'SAME' if same else 'DIFF'} {len(code):7d} B  {name}")
    for name in sorted(set(new) - paired):
        print(f"NEW     {len(new[name]):7d} B  {name}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
