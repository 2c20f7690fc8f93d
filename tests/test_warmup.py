"""``python -m plugin.warmup``: every path it compiles runs (here on the host
backend), and on a GPU it fills CuPy's kernel cache."""

import os
import subprocess
import sys

import pytest

from plugin import warmup


@pytest.mark.parametrize("name", list(warmup.RUNS))
def test_each_flow_run_of_the_warmup_takes_its_steps(name):
    assert warmup.flow_run(*warmup.RUNS[name]) == warmup.STEPS["flow_max_steps"]


@pytest.mark.parametrize("name", list(warmup.SOLVES))
def test_each_solve_of_the_warmup_converges(name):
    assert warmup.type_solve(warmup.SOLVES[name]) > 0


@pytest.mark.gpu
def test_the_warmup_fills_an_empty_kernel_cache(tmp_path):
    env = {**os.environ, "CUPY_CACHE_DIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-m", "plugin.warmup"], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert f"CuPy's kernel cache is {tmp_path}" in out.stdout
    assert len([p for p in tmp_path.rglob("*") if p.is_file()]) > 50  # one file a compiled kernel
