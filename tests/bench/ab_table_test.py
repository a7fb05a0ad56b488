#!/usr/bin/env python3
"""bench/ab_table.py on a log of alternated runs: means per side, new / old, the marks past the
threshold, a result only one side has, results in first-seen order, lines outside a block
ignored, and a clear failure on a log with no runs."""
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bench", "ab_table.py")

LOG = """RESULT stray ms=9.0 (before any header: ignored)
=== old 1
RESULT b ms=0.2000 gb_per_s=1
RESULT a ms=1.0000
RESULT only_old ms=3.0
=== new 1
RESULT b ms=0.1900
RESULT a ms=1.0100
RESULT only_new ms=4.0
=== old 2
RESULT b ms=0.2200
RESULT a ms=1.0300
some other line
=== new 2
RESULT b ms=0.1900
RESULT a ms=1.0100
"""


def run(path, *args, check=True):
    return subprocess.run([sys.executable, SCRIPT, path, *args], check=check, capture_output=True, text=True)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "ab.log")
        with open(path, "w") as f:
            f.write(LOG)
        lines = run(path).stdout.splitlines()
        assert lines[0].split()[-3:] == ["old", "new", "new/old"], lines[0]
        names = [l.split()[0] for l in lines[1:]]
        assert names == ["b", "a", "only_old", "only_new"], names  # first seen, old side first
        b = lines[1].split()
        # old mean 0.21, new 0.19: 0.905, faster than 1 - 0.02.
        assert b[1:5] == ["0.2100", "0.1900", "0.905", "<<"], b
        a = lines[2].split()
        assert a[1:4] == ["1.0150", "1.0100", "0.995"] and len(a) == 4, a  # within 2%: no mark
        assert "one side only" in lines[3] and lines[3].split()[1:3] == ["3.0000", "-"], lines[3]
        assert lines[4].split()[1:3] == ["-", "4.0000"], lines[4]
        # A tighter threshold marks a's 0.5% too.
        a_tight = run(path, "--threshold", "0.001").stdout.splitlines()[2].split()
        assert a_tight[-1] == "<<", a_tight
        empty = os.path.join(tmp, "empty.log")
        open(empty, "w").close()
        failed = run(empty, check=False)
        assert failed.returncode != 0 and "no RESULT lines" in failed.stderr, failed
    print("ab_table: ok")


if __name__ == "__main__":
    main()
