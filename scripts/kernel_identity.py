#!/usr/bin/env python3
"""Whether a CUDA source file's kernels are the same code at two revisions, without a GPU.

  python3 scripts/kernel_identity.py REV src/kernels/moe_fp8.cu [more .cu files]

Compiles each file from REV's tree (git archive) and from the working tree to sm_90a cubins and to PTX, then per
kernel prints whether its sm_90a machine code (.text section, by md5) is identical, and if not, whether its PTX body
is, with the anonymous-namespace hash, branch labels and parameter names normalized (a grown parameter struct moves
parameter offsets in SASS but leaves PTX bodies alone). Kernels are matched by their mangled names; a kernel that
gained a defaulted template argument is matched with --drop-arg REGEX, removed from the new names and PTX bodies
(e.g. 'Lb0E(?=EEv)': a trailing `false` argument). Exit 1 when a kernel is gone or different. Used by sessions that
land a kernel refactor between device calls.
"""
import argparse
import hashlib
import os
import re
import subprocess
import sys
import tempfile

NVCC = os.environ.get("NVCC", "/usr/local/cuda/bin/nvcc")
FLAGS = ["-DDSERVE_WITH_CUDA=1", "-O3", "-DNDEBUG", "-std=c++17", "-x", "cu"]


def compile_one(root, cu, out, kind):
    arch = "code=sm_90a" if kind == "cubin" else "code=compute_90a"
    cmd = [NVCC, *FLAGS, f"-I{root}/src", f"--generate-code=arch=compute_90a,{arch}", f"-{kind}", "-o", out,
           os.path.join(root, cu)]
    subprocess.run(cmd, check=True)


def text_sections(cubin):
    names = subprocess.run(["readelf", "-SW", cubin], capture_output=True, text=True).stdout
    out = {}
    for sec in sorted(set(re.findall(r"\.text\.(\S+)", names))):
        dump = subprocess.run(["readelf", "-x", f".text.{sec}", cubin], capture_output=True, text=True).stdout
        out[normalize_name(sec)] = hashlib.md5("\n".join(dump.splitlines()[2:]).encode()).hexdigest()[:8]
    return out


def normalize_name(name):
    # The anonymous namespace's name: a hash of the path, then the file name and a hash that follows the file's
    # content (cu_<8 hex digits>), so it differs between any two revisions of a file.
    return re.sub(r"_cu_[0-9a-f]{8}", "_cu_H", re.sub(r"_GLOBAL__N__[0-9a-f_]+", "G", name))


def ptx_bodies(ptx):
    src = open(ptx).read()
    out = {}
    for m in re.finditer(r"\.entry\s+(\S+)\((.*?)\)\s*(\.maxntid[^{]*)?\{(.*?)\n\}", src, re.S):
        name = m.group(1)
        body = m.group(4).replace(name, "KERNEL")
        body = normalize_name(body)
        body = re.sub(r"\$L__BB\d+_", "$L__BB_", body)
        body = re.sub(r"_param_\d+", "_param_N", body)
        out[normalize_name(name)] = body
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("rev")
    ap.add_argument("files", nargs="+")
    ap.add_argument("--drop-arg", default="", help="regex removed from the new kernels' mangled names and bodies")
    a = ap.parse_args()
    repo = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True,
                          check=True).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        old_root = os.path.join(tmp, "old")
        os.makedirs(old_root)
        archive = subprocess.run(["git", "-C", repo, "archive", a.rev, "src"], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", old_root], input=archive, check=True)
        differ = 0
        for cu in a.files:
            res = {}
            for tag, root in (("old", old_root), ("new", repo)):
                cubin, ptx = os.path.join(tmp, f"{tag}.cubin"), os.path.join(tmp, f"{tag}.ptx")
                compile_one(root, cu, cubin, "cubin")
                compile_one(root, cu, ptx, "ptx")
                res[tag] = (text_sections(cubin), ptx_bodies(ptx))
            (old_sass, old_ptx), (new_sass, new_ptx) = res["old"], res["new"]

            def drop(text):
                return re.sub(a.drop_arg, "", text) if a.drop_arg else text

            new_sass = {drop(k): v for k, v in new_sass.items()}
            new_ptx = {drop(k): drop(v) for k, v in new_ptx.items()}
            print(f"== {cu}: {len(old_sass)} kernels at {a.rev}, {len(new_sass)} now")
            for k in sorted(old_sass):
                if k not in new_sass:
                    print(f"  gone       {k}")
                    differ += 1
                elif old_sass[k] == new_sass[k]:
                    print(f"  same SASS  {k}")
                elif old_ptx.get(k) is not None and old_ptx.get(k) == new_ptx.get(k):
                    print(f"  same PTX   {k}  (SASS differs: parameter offsets or scheduling)")
                else:
                    print(f"  DIFFERENT  {k}")
                    differ += 1
            for k in sorted(set(new_sass) - set(old_sass)):
                print(f"  new        {k}")
        return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
