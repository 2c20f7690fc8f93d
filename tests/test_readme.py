"""The documents' option tables are the types' own (scripts/option_tables.py
writes them from the code), and the README stays a first page."""

import importlib.util
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def option_tables():
    spec = importlib.util.spec_from_file_location("option_tables", ROOT / "scripts" / "option_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_option_tables_match_the_code():
    module = option_tables()
    shown = []
    for path in module.DOCS:
        text = path.read_text()
        shown += re.findall(r"<!-- options: (\w+) -->", text)
        assert module.rewrite(text) == text, f"{path.name}'s option tables are stale: run python scripts/option_tables.py"
    assert sorted(shown) == sorted(module.tables()), "every type's options have one table in docs/"


def test_the_readme_is_a_first_page():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200


def test_help_prints_every_option_of_the_tables_with_its_default():
    """-help lists each table row's option with the default the README shows."""
    module = option_tables()
    script = ("import sys, petsc4py; petsc4py.init(sys.argv); import plugin; from petsc4py import PETSc; "
              "from petsc_ext.matrices import aij_from_csr; import scipy.sparse as sp; "
              "A = aij_from_csr(*(lambda m: (m.indptr, m.indices, m.data))(sp.identity(4, format='csr')), (4, 4), "
              "mat_type='gpusell'); A.setFromOptions(); "
              "[(lambda k: (k.setOperators(A), k.setType(t), k.getPC().setType(p), k.setFromOptions()))"
              "(PETSc.KSP().create()) for t, p in (('cacg', 'ainv'), ('gmres', 'wbilu'), ('graphcg', 'gpuamg'), ('cg', 'layerfft'))]; "
              "da = PETSc.DMDA().create(dim=2, sizes=(4, 4), stencil_width=1, setup=False); da.setMatType('gpusell'); da.setUp(); "
              "from plugin.flow.solver import FlowSolver; FlowSolver.from_dmda(da, (1.0, 1.0), 0.1)")
    out = subprocess.run([sys.executable, "-c", script, "-help"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    for name, options in module.tables().items():
        for option in options:
            default = str(option.default).lower() if isinstance(option.default, bool) else str(option.default)
            assert re.search(rf"-{option.name} <now \S* : formerly {re.escape(default)}>", out.stdout), (
                name, option.name)
