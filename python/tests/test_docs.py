"""The Python chapter of docs/user-guide.md: every python block runs as it is written (the
first program with the built-in kernel library in place of build/lib/libmykernels.so)."""
import os
import re
import subprocess
import sys

import pytest

import plexus

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def blocks():
    with open(os.path.join(ROOT, "docs", "user-guide.md")) as f:
        text = f.read()
    chapter = text[text.index("\n## Python\n"):]
    chapter = chapter[:chapter.index("\n## ", 1)]
    return re.findall(r"```python\n(.*?)```", chapter, re.S)


def test_the_chapter_has_its_examples():
    assert len(blocks()) >= 4


@pytest.mark.parametrize("i", range(len(blocks())))
def test_guide_block_runs(tmp_path, i):
    code = blocks()[i]
    lib = os.path.join(os.path.dirname(plexus.__file__), "libplexus_pykernels.so")
    code = code.replace("build/lib/libmykernels.so", lib)
    if "class Test" in code:
        code = code.replace("TestScale.main()", "TestScale.main([])")
    f = tmp_path / ("block%d.py" % i)
    f.write_text(code)
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(plexus.__file__)))
    r = subprocess.run([sys.executable, str(f)], capture_output=True, text=True, timeout=120,
                       cwd=str(tmp_path), env=env)
    assert r.returncode == 0, r.stdout + r.stderr
