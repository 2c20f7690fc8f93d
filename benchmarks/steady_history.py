"""How a demo's run approaches its steady state: max |u^{n+1} - u^n| / dt
(the demo's -flow_steady_tol test) once every --every time units, the steps
whose dt differs from the step's before, and at the end the cells where that
change is largest. A steady run that never reaches its tolerance shows here
whether the change still falls, hovers or grows, and where it sits.

    python benchmarks/steady_history.py --every 1 --out history.txt -- \\
        demos/cylinder.py -cyl_case 3d1z -flow_mesh cylinder3d-tet-2.msh -flow_scheme consistent

Everything after -- is the demo and its options (one rank; a run with
-flow_steady_tol, as the steady demos set it, tests every step). The value a
run reports after its last steps, which are shortened to end on t_end, is
the change of a step of another dt: the list of dt changes says which
samples follow one.
"""

import argparse

import numpy

import harness


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=float, default=1.0, help="time between samples")
    parser.add_argument("--cells", type=int, default=12, help="cells listed at the end")
    parser.add_argument("--out", help="the report (default: printed)")
    args, demo = harness.demo_arguments(parser, in_process=True)
    from gpu_mats.backend import to_host
    from plugin.flow.integrator import FractionalStep
    from plugin.flow.solver import FlowSolver

    lines, last = [], {"sample": args.every, "dt": None}
    change_rate, run = FractionalStep.change_rate, FlowSolver.run

    def sampled(stepper, state):
        value = change_rate(stepper, state)
        if last["dt"] is not None and state.dt_old != last["dt"]:
            lines.append(f"dt: step {state.step}, t {state.t:.6g}: {last['dt']:.10g} -> {state.dt_old:.10g}")
        last["dt"] = state.dt_old
        if state.t >= last["sample"]:
            lines.append(f"change: t {state.t:.3f} step {state.step} max |du/dt| {value:.4e}")
            last["sample"] += args.every
        return value

    def where(solver, state, *rest, **options):
        final = run(solver, state, *rest, **options)
        u, old = to_host(solver.xp, final.u), to_host(solver.xp, final.u_old)
        rate = numpy.abs(u - old).max(axis=0) / final.dt_old
        g = solver.geometry
        boundary = numpy.isin(numpy.arange(g.num_cells), g.boundary_cells - g.cell_start)
        lines.append("last step: max %.3e, percentiles 99.9 %.3e, 99 %.3e, 90 %.3e, 50 %.3e" % (
            rate.max(), *numpy.percentile(rate, [99.9, 99, 90, 50])))
        for i in numpy.argsort(rate)[::-1][:args.cells].tolist():
            lines.append(f"cell {i}: {rate[i]:.3e} at {numpy.round(g.centroids[i], 4).tolist()}, volume "
                         f"{g.volumes[i]:.3g}{', on the boundary' if boundary[i] else ''}")
        return final

    FractionalStep.change_rate, FlowSolver.run = sampled, where
    try:
        harness.run_demo(demo)
    finally:
        FractionalStep.change_rate, FlowSolver.run = change_rate, run
    harness.write_report("\n".join(lines) + "\n", args.out)


if __name__ == "__main__":
    main()
