#!/usr/bin/python3
"""Prints the files and functions of a source tree that are longer than the limits.

`scripts/check_sizes.py [--root src/comm] [--max-file 900] [--max-function 60]` lists every
C file (.c and .h) under the root with more lines than --max-file, then every function with
more lines than --max-function, longest first, and exits 1 when it listed anything, 0 when
nothing is over, 2 when it cannot count (ctags missing or failing). A function's lines are
counted from the line that names it to its closing brace, both included, as Universal Ctags
reports them (`ctags --fields=+ne`: the fields line: and end:).
"""

import argparse
import os
import shutil
import subprocess
import sys
from typing import List, Tuple


def c_files(root: str) -> List[str]:
    """Returns the .c and .h files under root, sorted, as paths joined to root."""
    found = []
    for d, _, names in os.walk(root):
        found += [os.path.join(d, n) for n in names if n.endswith((".c", ".h"))]
    return sorted(found)


def line_count(path: str) -> int:
    """Returns the number of lines in path."""
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def long_functions(files: List[str], limit: int) -> List[Tuple[int, str, str, int]]:
    """Returns (lines, file, function, first line) for each function longer than limit.

    Raises RuntimeError when ctags is missing or fails, or names a function without its end.
    """
    ctags = shutil.which("ctags")
    if ctags is None:
        raise RuntimeError("ctags is not on PATH: install Universal Ctags "
                           "(apt-get install universal-ctags)")
    cmd = [ctags, "--sort=no", "--fields=+ne", "--c-kinds=f", "--language-force=C",
           "-o", "-"] + files
    run = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if run.returncode != 0:
        raise RuntimeError(f"ctags failed with status {run.returncode}: {run.stderr.strip()}")
    out = []
    for row in run.stdout.splitlines():
        cols = row.split("\t")
        fields = dict(c.split(":", 1) for c in cols[3:] if ":" in c)
        if "line" not in fields or "end" not in fields:
            raise RuntimeError(f"ctags gave no line or end for {cols[0]} in {cols[1]}: this "
                               "script needs Universal Ctags (--fields=+ne)")
        start, end = int(fields["line"]), int(fields["end"])
        if end - start + 1 > limit:
            out.append((end - start + 1, cols[1], cols[0], start))
    return sorted(out, key=lambda t: (-t[0], t[1], t[2]))


def main() -> int:
    """Checks the tree; returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default="src/comm", help="the tree to check (src/comm)")
    ap.add_argument("--max-file", type=int, default=900, help="most lines in a file (900)")
    ap.add_argument("--max-function", type=int, default=60,
                    help="most lines in a function (60)")
    args = ap.parse_args()
    if not os.path.isdir(args.root):
        print(f"check_sizes: {args.root} is not a directory; run from the repository root "
              "or give --root", file=sys.stderr)
        return 2
    files = c_files(args.root)
    big = [(line_count(p), p) for p in files]
    big = sorted([(n, p) for n, p in big if n > args.max_file], reverse=True)
    try:
        funcs = long_functions(files, args.max_function)
    except RuntimeError as e:
        print(f"check_sizes: {e}", file=sys.stderr)
        return 2
    for n, p in big:
        print(f"file over {args.max_file} lines: {p}: {n}")
    for n, p, name, start in funcs:
        print(f"function over {args.max_function} lines: {p}:{start}: {name}: {n}")
    print(f"check_sizes: {len(files)} files under {args.root}: {len(big)} over "
          f"{args.max_file} lines, {len(funcs)} functions over {args.max_function} lines")
    return 1 if big or funcs else 0


if __name__ == "__main__":
    sys.exit(main())
