"""hypre's BoomerAMG-preconditioned CG on the GPU, the peer of
benchmarks/poisson.py's gpuamg: hypre's own ``ij`` driver on the same
7-point Dirichlet Laplacian (b = 1, x = 0, rtol 1e-8 on the residual's
2-norm against b's), its set-up and solve timed by the driver (the device
synchronized) on its second run, parsed into one JSON file.

The PETSc of this project's GPU machine is built without hypre, so hypre is
built on its own there from the source of hypre-space/hypre:

    cd hypre/src && ./configure CC=mpicc CXX=mpicxx --with-cuda --with-gpu-arch=90 --disable-fortran \\
        --without-umpire --enable-device-memory-pool && make -j16 && (cd test && make ij)
    python benchmarks/hypre_ij.py --ij hypre/src/test/ij --sizes 128 256 --json hypre.json

Settings: hypre's GPU defaults (PMIS coarsening, extended+i interpolation
by matrix products, l1-Jacobi smoothing), and the same with one level of
aggressive coarsening (``-agg_nl 1``).
"""

import argparse
import re
import subprocess

import harness

SETTINGS = {"defaults": [], "agg_nl 1": ["-agg_nl", "1"]}
DEVICE = ["-memory_device", "-exec_device", "-exec2_device"]


def parse(text):
    """The driver's second set-up and solve (s), its iterations, final relative residual, complexities."""
    setups = [float(t) for t in re.findall(r"Setup phase times:\s*=+\s*PCG Setup:\s*wall clock time = (\S+)", text)]
    solves = [float(t) for t in re.findall(r"Solve phase times:\s*=+\s*PCG Solve:\s*wall clock time = (\S+)", text)]
    if not setups or not solves:
        raise ValueError(f"no PCG set-up and solve times in the driver's output:\n{text[-2000:]}")
    result = {"setup_s": setups[-1], "solve_s": solves[-1], "first_setup_s": setups[0], "first_solve_s": solves[0],
              "iterations": int(re.findall(r"Iterations = (\d+)", text)[-1]),
              "final_rel_residual": float(re.findall(r"Final Relative Residual Norm = (\S+)", text)[-1])}
    complexities = re.findall(r"Complexity:\s+grid = (\S+)\s+operator = (\S+)", text)
    if complexities:
        result["grid_complexity"], result["operator_complexity"] = map(float, complexities[-1])
    result["us_per_iteration"] = result["solve_s"] / max(result["iterations"], 1) * 1e6
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ij", required=True, help="hypre's ij driver, built with CUDA")
    parser.add_argument("--sizes", type=int, nargs="*", default=[128, 256])
    parser.add_argument("--settings", nargs="*", default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds a run may take")
    parser.add_argument("--json", required=True)
    args = parser.parse_args()
    results = {"meta": harness.metadata(), "runs": []}
    for n in args.sizes:
        for setting in args.settings:
            command = [args.ij, *DEVICE, "-laplacian", "-n", str(n), str(n), str(n), "-solver", "1", "-tol", "1e-8",
                       "-second_time", "1", *SETTINGS[setting]]
            run = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
            if run.returncode:
                raise RuntimeError(f"{' '.join(command)} failed:\n{run.stdout[-2000:]}{run.stderr[-2000:]}")
            results["runs"].append({"problem": f"7-point {n}^3 Dirichlet", "setting": setting,
                                    "command": " ".join(command), **parse(run.stdout)})
            harness.write_json(args.json, results, quiet=True)
    harness.print_table(results["runs"], [("problem", "problem", "{}"), ("setting", "setting", "{}"),
                                          ("iterations", "its", "{}"), ("setup_s", "setup s", "{:.3f}"),
                                          ("solve_s", "solve s", "{:.4f}"), ("us_per_iteration", "us/it", "{:.0f}"),
                                          ("final_rel_residual", "|r|/|b|", "{:.1e}")])


if __name__ == "__main__":
    main()
