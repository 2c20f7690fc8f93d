"""How much of a DFG cylinder's result is the mesh's: the demo's mesh of a
level and meshes as fine that place their cells otherwise (its cell size
times 0.97 and 1.03, gmsh's Delaunay and MeshAdapt algorithms in place of
Frontal-Delaunay: demos/cylinder_mesh.make's ``scale`` and ``algorithm``),
each run with each scheme; the summaries gathered into one JSON file,
written after every run. ``--wall-layer`` gives every mesh a layer of
split quadrilaterals on the cylinder (make's ``wall_layer``).

    python benchmarks/mesh_noise.py --level 2 --json mesh-noise.json -- demos/cylinder.py -cyl_case 2d1

Everything after -- is the demo and its options; each run adds -flow_mesh
and its scheme's options. The meshes are made with gmsh, or, with
``--mesh-dir``, kept there and read from there where they are already
(made where gmsh is, run where it is not).
"""

import argparse
import contextlib
import json
import os
import sys
import tempfile

import harness

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "demos"))

MESHES = {  # name: make()'s keyword arguments
    "the demo's": {},
    "size x 0.97": {"scale": 0.97},
    "size x 1.03": {"scale": 1.03},
    "Delaunay": {"algorithm": 5},
    "MeshAdapt": {"algorithm": 1},
}
SCHEMES = {
    "symmetric": ["-flow_scheme", "symmetric"],
    "consistent": ["-flow_scheme", "consistent"],
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", required=True)
    parser.add_argument("--level", type=int, default=2)
    parser.add_argument("--meshes", nargs="*", default=list(MESHES), choices=list(MESHES))
    parser.add_argument("--schemes", nargs="*", default=list(SCHEMES), choices=list(SCHEMES))
    parser.add_argument("--timeout", type=float, default=None, help="seconds a run may take")
    parser.add_argument("--wall-layer", type=float, nargs=3, metavar=("FIRST", "RATIO", "THICKNESS"),
                        help="a layer on the cylinder: its first cells FIRST times the wall's cell size thick, "
                        "each next RATIO times the last, THICKNESS times the wall's cell size in all")
    parser.add_argument("--mesh-dir", help="keep the meshes here, and read those already here")
    args, demo = harness.demo_arguments(parser)
    results = {"meta": harness.metadata(), "command": demo, "level": args.level, "wall_layer": args.wall_layer,
               "runs": {}}
    with contextlib.ExitStack() as stack:
        directory = args.mesh_dir or stack.enter_context(tempfile.TemporaryDirectory())
        os.makedirs(directory, exist_ok=True)
        layer = "-wall-" + "-".join(map(str, args.wall_layer)) if args.wall_layer else ""
        for mesh in args.meshes:
            path = os.path.join(directory, f"cylinder-{args.level}-{list(MESHES).index(mesh)}{layer}.msh")
            cells = _mesh(path, args.level, wall_layer=args.wall_layer, **MESHES[mesh])
            for scheme in args.schemes:
                summary = harness.demo_summary(demo, ["-flow_mesh", path, *SCHEMES[scheme]], args.timeout)
                results["runs"][f"{mesh}, {scheme}"] = {"cells": cells, **summary}
                print(f"{mesh} ({cells} cells), {scheme}:", json.dumps(summary.get("relative_errors", summary))[:300],
                      flush=True)
                harness.write_json(args.json, results, quiet=True)


def _mesh(path, level, **options):
    """The 2D mesh at ``path``, made there unless it is; its cell count."""
    if os.path.exists(path):
        import meshio

        return sum(len(c.data) for c in meshio.read(path).cells if c.type.startswith("triangle"))
    import cylinder_mesh  # gmsh

    return cylinder_mesh.make(2, level, path, **options)


if __name__ == "__main__":
    main()
