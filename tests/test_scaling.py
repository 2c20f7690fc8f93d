"""benchmarks/scaling.py at small sizes on the host (NumPy backend): every case
measured on one rank and on all, the efficiencies, the halo and its hidden
fraction, and the report with its plot, so the script cannot rot between the
runs on several GPUs. The unstructured case runs on 162 tetrahedra of the cube."""

import os
import sys

import pytest
from mpi4py import MPI
from petsc4py import PETSc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))

import scaling  # noqa: E402

SMALL = ["--warmup", "1", "--steps", "2", "--repeats", "1", "--peer-mat", "aij"]


@pytest.mark.mpi
def test_scaling_measures_every_case_on_one_rank_and_on_all(tmp_path):
    import meshio

    from meshes import unit_mesh

    world = MPI.COMM_WORLD
    directory = world.bcast(str(tmp_path) if world.rank == 0 else None)
    cube = os.path.join(directory, "cube.msh")  # 162 tetrahedra, groups lid and wall (benchmarks/cube_mesh.py's)
    if world.rank == 0:
        meshio.write(cube, unit_mesh("tetra", n=3), file_format="gmsh22", binary=True)
    world.Barrier()
    sizes = ["--weak", "4", "--strong", "8", "--mesh", cube]
    one = os.path.join(directory, f"one-{world.rank}.json")
    rows = scaling.main([*sizes, *SMALL, "--json", one], comm=PETSc.COMM_SELF)
    every = os.path.join(directory, "all.json")
    rows += scaling.main([*sizes, *SMALL, "--json", every], comm=PETSc.COMM_WORLD)
    rows = scaling.efficiencies(rows)
    assert {(r["mode"], r["case"], r["ranks"]) for r in rows} == {
        (mode, case, ranks) for mode in ("weak", "strong", "mesh") for case in scaling.CASES
        for ranks in (1, world.size)}
    for row in rows:
        assert row["seconds"] > 0 and row["efficiency"] > 0
        if "reason" in row:
            assert row["reason"] > 0, row  # converged
        if row["case"] == "spmv":
            assert row["peer_us"] > 0 and row["peer"] in ("seqaij", "mpiaij")
            if row["ranks"] > 1:
                assert row["halo_bytes_per_rank"] > 0 and 0 <= row["hidden_fraction"] <= 1
    weak = [r for r in rows if r["mode"] == "weak" and r["case"] == "spmv"]
    assert [r["cells"] for r in weak] == [64, 64 * world.size]  # n^3 a rank
    strong = [r for r in rows if r["mode"] == "strong" and r["case"] == "spmv"]
    assert [r["cells"] for r in strong] == [512, 512] and strong[0]["efficiency"] == 1.0
    tets = [r for r in rows if r["mode"] == "mesh" and r["case"] == "spmv"]
    assert [r["cells"] for r in tets] == [162, 162] and (world.size == 1 or tets[1]["faces_cut"] > 0)
    world.Barrier()
    if world.rank == 0:
        png = os.path.join(directory, "scaling.png")
        reported = scaling.main(["--report", os.path.join(directory, "one-0.json"), every, "--png", png])
        assert len(reported) == 2 * 3 * len(scaling.CASES) and os.path.getsize(png) > 0
