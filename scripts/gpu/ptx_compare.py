#!/usr/bin/env python3
"""Compare gpu/cuda's PTX at a git revision with the working tree's, entry by entry.

    python3 scripts/gpu/ptx_compare.py [REV]      (REV defaults to HEAD)

A change to the kernels' sources that should not change what the GPU runs (a
refactor, a planted defect moved out) must leave every .entry the same
instructions. Two things are renamed by such changes without changing the code,
and are normalised before comparing: branch labels ($L__BB<fn>_<n>, numbered per
file) and the mangled names of __shared__ variables (_ZZ..., which carry the
enclosing function's template arguments). Exits 1 if an entry differs, is gone
or is new.
"""
import re
import subprocess
import sys


def entries(text):
    out = {}
    for part in re.split(r'\n(?=(?:\.visible |\.weak |)?\.(?:entry|func) )', text):
        m = re.match(r'(?:\.visible |\.weak |)?\.(entry|func)\s+(?:\([^)]*\)\s*)?(\S+?)\(', part)
        if not m:
            continue
        body = re.sub(r'\$L__BB\d+_\d+', '$L', part)
        body = re.sub(r'(?m)^\s*//.*$', '', body)
        names = {}
        body = re.sub(r'_ZZ\w+', lambda s: names.setdefault(s.group(0), '$S%d' % len(names)), body)
        out[m.group(2)] = body
    return out


def main():
    rev = sys.argv[1] if len(sys.argv) > 1 else 'HEAD'
    bad = False
    for arch in ('80', '90'):
        path = f'gpu/cuda/ptx/kernels_sm{arch}.ptx'
        old = entries(subprocess.run(['git', 'show', f'{rev}:{path}'], capture_output=True, text=True, check=True).stdout)
        new = entries(open(path).read())
        same = [k for k in old if k in new and old[k] == new[k]]
        differ = [k for k in old if k in new and old[k] != new[k]]
        gone = [k for k in old if k not in new]
        added = [k for k in new if k not in old]
        print(f'sm_{arch}: {len(old)} entries at {rev}, {len(new)} now; the same {len(same)}; '
              f'differ {differ or "none"}; gone {gone or "none"}; new {added or "none"}')
        bad = bad or bool(differ or gone or added)
    sys.exit(1 if bad else 0)


if __name__ == '__main__':
    main()
