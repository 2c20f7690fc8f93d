"""The README's demo at small sizes, with its own validation: second-order error."""

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_demo(n, *options):
    out = subprocess.run([sys.executable, "demos/poisson3d.py", "-n", str(n), "-dm_mat_type", "gpusell",
                          "-ksp_type", "cg", "-pc_type", "jacobi", "-ksp_rtol", "1e-10", *options],
                         capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert re.search(r"matrix (seq|mpi)aijgpusell", out)
    return out, float(re.search(r"max error against the exact solution: (\S+)", out).group(1))


def test_poisson_demo_converges_at_second_order_and_logs_gpusell():
    _, coarse = run_demo(7)
    out, fine = run_demo(15, "-log_view")
    assert 3.5 < coarse / fine < 4.5  # h halves: the error falls by 4
    assert re.search(r"^GPUSELLMult\s+\d+", out, re.MULTILINE)
    assert re.search(r"^GPUSELLBuild\s+1 ", out, re.MULTILINE)
