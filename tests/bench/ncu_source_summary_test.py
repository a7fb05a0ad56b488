#!/usr/bin/env python3
"""bench/ncu_source_summary.py on a table shaped like `ncu --page source --csv --print-source
sass`: instructions grouped by how often they ran, per-unit costs, the busiest group's opcodes
(predicates stripped), the most stalled instructions, and a second kernel's table ignored."""
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bench", "ncu_source_summary.py")

HEADER = ('"Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)",'
          '"# Samples","Instructions Executed"\n')
TABLE = ('"Kernel Name","void k<1>(int)"\n' + HEADER +
         '"0x10","S2R R0, SR_TID.X","5","4","5","128"\n'            # prologue: once per warp (128 warps)
         '"0x20","LOP3.LUT R1, R0, 0x3, RZ, 0xc0, !PT","1","1","1","1,024"\n'  # loop body: 8 steps a warp
         '"0x30","@!P0 HMMA.16816.F32 R4, R8, R12, R4","40","30","40","1,024"\n'
         '"0x40","LDS.64 R2, [R3]","9","9","9","1,024"\n'
         '"0x50","LOP3.LUT R5, R5, 0x64006400, R6, 0xec, !PT","0","0","0","1,024"\n'
         '"0x60","EXIT","2","2","2","128"\n'
         '"Kernel Name","void other(int)"\n' + HEADER +
         '"0x10","FADD R0, R0, R1","999","999","999","1,000,000"\n')


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], check=True, capture_output=True, text=True).stdout


def main():
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "sass.csv")
        with open(path, "w") as f:
            f.write(TABLE)
        out = run(path, "--units", "1024")
        lines = out.splitlines()
        # 6 instructions of the first kernel; 128 * 2 + 1,024 * 4 = 4,352 executed; 4.25 a step.
        assert lines[0] == "6 instructions in the binary, 4,352 executed (warp-level), 4.2 a unit", lines[0]
        loop = next(l for l in lines if l.split()[:1] == ["1,024"])
        assert loop.split()[1:3] == ["4", "4.0"], loop
        assert "94.1%" in loop, loop  # 4,096 of 4,352
        assert "87.7%" in loop, loop  # 50 of the first kernel's 57 stall samples
        once = next(l for l in lines if l.split()[:1] == ["128"])
        assert once.split()[1:3] == ["2", "0.2"], once
        busiest = lines[lines.index("opcodes of the busiest group (1,024 runs each):") + 1]
        assert busiest.strip() == "LOP3 2, HMMA 1, LDS 1", busiest  # the predicate @!P0 is not an opcode
        stalled = lines[lines.index("most stalled instructions (samples, runs, SASS):") + 1]
        assert stalled.split()[:3] == ["40", "1,024", "@!P0"], stalled
        assert "FADD" not in out, "the second kernel's table must be ignored"
        # Without a SourceCounters table the script says so and fails.
        bad = os.path.join(tmp, "bad.csv")
        with open(bad, "w") as f:
            f.write('"Address","Source"\n"0x10","EXIT"\n')
        r = subprocess.run([sys.executable, SCRIPT, bad], capture_output=True, text=True)
        assert r.returncode != 0 and "SourceCounters" in r.stderr, (r.returncode, r.stderr)
    print("ncu_source_summary: ok")


if __name__ == "__main__":
    main()
