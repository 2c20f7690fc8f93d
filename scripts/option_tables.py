"""Writes the documents' option tables from the types' own option tables.

Each table stands in docs/options.md (the types) or docs/flow.md (the flow
driver) between ``<!-- options: NAME -->`` and ``<!-- end options -->``;
tests/test_readme.py checks that they agree with the code. Run after
changing an option:

    python scripts/option_tables.py
"""

import pathlib
import re
import sys

DOCS = [pathlib.Path(__file__).resolve().parent.parent / "docs" / name for name in ("options.md", "flow.md")]
HEADER = "| option | what it sets (default) |\n| --- | --- |"


def tables():
    """{name: the option table of that type}."""
    import plugin  # noqa: F401  (PETSc initialised, types registered)
    from petsc_ext import gpusell
    from petsc_ext.ainv import ApproximateInversePC
    from petsc_ext.cacg import CommunicationAvoidingCG
    from petsc_ext.gpuamg import AggregationMultigridPC
    from petsc_ext.graphcg import GraphCG
    from petsc_ext.layerfft import LayerTransformPC
    from petsc_ext.wbilu import WavefrontBlockILU
    from plugin.flow import solver_options

    return {"gpusell": gpusell.OPTIONS, "ainv": ApproximateInversePC.OPTIONS, "wbilu": WavefrontBlockILU.OPTIONS,
            "gpuamg": AggregationMultigridPC.OPTIONS, "cacg": CommunicationAvoidingCG.OPTIONS,
            "graphcg": GraphCG.OPTIONS, "layerfft": LayerTransformPC.OPTIONS, "flow": solver_options.OPTIONS}


def block(name, options):
    from petsc_ext.options import readme_table

    return f"<!-- options: {name} -->\n{HEADER}\n{readme_table(options)}\n<!-- end options -->"


def rewrite(text):
    """``text`` with every options block written anew."""
    made = tables()

    def replace(match):
        return block(match.group(1), made[match.group(1)])

    return re.sub(r"<!-- options: (\w+) -->.*?<!-- end options -->", replace, text, flags=re.DOTALL)


if __name__ == "__main__":
    for path in DOCS:
        path.write_text(rewrite(path.read_text()))
    sys.exit(0)
