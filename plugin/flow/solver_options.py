"""The flow driver's options (-flow_*, listed by -help and in docs/options.md
by scripts/option_tables.py): each one's name, FlowSolver attribute, default,
help and the values it takes. A program sets its own defaults for them with
petsc_ext.options.option_defaults around FlowSolver's constructor."""

from petsc_ext.options import Option

from .forcing import KINDS as FORCING_KINDS
from .les import MODELS as LES_MODELS
from .linear_solvers import ISOTROPIC_SPARSIFY, ISOTROPIC_SPREAD
from .pressure_guess import EXACT_PCS, FISCHER_SIZE
from .scheme import GRADIENTS, MEMORY_BETAS, SCHEMES, WALL_PRESSURE_GRADIENTS

DIFFUSION = ("explicit", "implicit")
PRESSURE_LAPLACIAN = ("compact", "wide")
PRESSURE_GUESSES = ("auto", "fischer", "extrapolated", "previous")
PRESSURE_LEVELS = ("auto", "algebraic", "geometric")
ASSEMBLY = ("auto", "host", "device")
# A time step below this fraction of the run's first is a blow-up: the
# velocity growing without bound while the CFL limit keeps its number down.
COLLAPSE = 1e-6

OPTIONS = (
    Option("flow_cfl", "cfl", 0.5, "target convective CFL number of the adaptive dt", above=0.0),
    Option("flow_fourier", "fourier", 0.4, "explicit diffusion: dt times max(D_ii / Omega_i); stable below 0.5",
           above=0.0, high=0.5),
    Option("flow_memory_fourier", "memory_fourier", 4.0, "Crank-Nicolson with the consistent scheme's fourier "
           "face memory: dt times max(D_ii / Omega_i) at most this (0: no limit), below where modes of a few "
           "small cells were measured to grow (BENCHMARKS.md)", low=0.0),
    Option("flow_dt", "fixed_dt", 0.0, "fixed time step (0: adaptive)", low=0.0),
    Option("flow_diffusion", "diffusion", "explicit", "diffusion explicit, or Crank-Nicolson with momentum "
           "systems (Omega + dt/2 D, symmetric positive definite) solved by a KSP with prefix momentum_ (GMRES; "
           "graphcg + ainv fsai on the project's matrices)", choices=DIFFUSION),
    Option("flow_pressure_levels", "pressure_levels", "auto", "with -pressure_pc_type gpuamg: geometric, the "
           "box's grids (rediscretized levels, linear interpolation, as -pressure_pc_type mg has them) cycled as "
           "stencils by gpuamg (one rank); algebraic, gpuamg's aggregation; auto: geometric on a DMDA box on "
           "one rank, else algebraic; either in float32 values, and on one rank under the V-cycle float32 cycle "
           "vectors, unless -pressure_pc_gpuamg_value_type or -pressure_pc_gpuamg_vector_type says otherwise; the "
           f"aggregation's coarse levels sparsified at {ISOTROPIC_SPARSIFY:g} where every cell's faces conduct "
           f"alike (largest over smallest A_f / delta_f of a cell at most {ISOTROPIC_SPREAD:g}), else Galerkin "
           "products, unless -pressure_pc_gpuamg_sparsify says otherwise",
           choices=PRESSURE_LEVELS),
    Option("flow_pressure_guess", "pressure_guess", "auto", "the pressure solve's initial guess: fischer, "
           f"Fischer's projection on the last {FISCHER_SIZE} solutions (PETSc's KSPGuess fischer, model 2, kept "
           "by the flow: in its checkpoints and its steps' CUDA graphs); extrapolated, the last pressure "
           "extrapolated linearly in time; previous, the last pressure; auto: fischer, but extrapolated where "
           f"the pressure's PC solves exactly ({', '.join(EXACT_PCS)}) or the pressure KSP has a KSPGuess of its "
           "own (-pressure_ksp_guess_type). The momentum predictor's pressure is the extrapolated one (the last "
           "with previous)", choices=PRESSURE_GUESSES),
    Option("flow_pressure_laplacian", "pressure_laplacian", "compact", "compact: L of Oyarzún 2015 (eq. 1.7) "
           "with the face velocities of eq. 2.9, which dissipates O(dt h^2) of the kinetic energy; wide: "
           "M Omega^-1 M^T, an exact projection that conserves it to O(dt^2), but blind to checkerboard "
           "pressures", choices=PRESSURE_LAPLACIAN),
    Option("flow_scheme", "scheme", "symmetric", "symmetric: the symmetry-preserving scheme (two-point face "
           "gradients, cell gradient -Omega^-1 M^T: the projection conserves kinetic energy; first order or worse "
           "on non-orthogonal cells); consistent: least-squares gradients and the corrections below, second order "
           "on triangles and tetrahedra, Omega G = -M^T given up (energy no longer conserved exactly, and the "
           "projection no longer one: repeated, it amplifies some velocities on tetrahedra, and what it takes a "
           "step does not shrink with dt, so the face velocities keep a memory, -flow_face_memory, which holds "
           "viscous flows but not inviscid ones: those keep the symmetric scheme). Sets the defaults of the "
           "options below; on a box both are the same operators",
           choices=SCHEMES),
    Option("flow_gradient", "gradient", "green-gauss", "cell gradient of the pressure correction and of the "
           "corrections: green-gauss (-Omega^-1 M^T) or least-squares (exact for linear fields on any cell)",
           choices=GRADIENTS),
    Option("flow_wall_pressure_gradient", "wall_pressure_gradient", "zero", "with -flow_gradient least-squares, "
           "the pressure's gradient at walls, inflows and slip faces: zero, its normal component zero at the face, "
           "an equation of the cell's least squares; interior, a cell's from its neighbours alone (the normal "
           "gradient at a wall balances the viscous force there: zero makes the wall cells' pressure first order), "
           "the zero equation kept where they leave a direction ill-determined (a corner) and in cells whose faces "
           "are all orthogonal (a box's), and u^p, which differs from the held velocities at a wall by G q, "
           "interpolated with the skewness correction from the held velocities of u^p + G q*. interior lifts the "
           "pressure's order on tetrahedra (Beltrami) and blows up on 3D-1Z's tetrahedra (BENCHMARKS.md)",
           choices=WALL_PRESSURE_GRADIENTS),
    Option("flow_nonorthogonal", "nonorthogonal", False, "the diffusion's deferred non-orthogonal correction: "
           "nu A t . (grad u)_f on each face whose normal is not along the line between its cells' centroids "
           "(Jasak 1996), walls too, explicit"),
    Option("flow_pressure_nonorthogonal", "pressure_nonorthogonal", False, "the pressure's non-orthogonal "
           "correction, deferred: L stays the two-point Laplacian, the face gradient's correction t . (grad q)_f "
           "of the guess (and of each corrector's q) goes to the right-hand side and to the face velocities"),
    Option("flow_pressure_correctors", "pressure_correctors", 0, "pressure solves per step after the first "
           "with -flow_pressure_nonorthogonal, each correcting from the last q (on fine gmsh tetrahedra the "
           "iteration can diverge: BENCHMARKS.md)", low=0, high=10),
    Option("flow_skewness", "skewness", False, "the face interpolation of the velocity corrected for "
           "skewness: the normal velocity at the face's centroid, exact for linear velocities"),
    Option("flow_convection_skewness", "convection_skewness", False, "the convected velocity at each face "
           "taken at the face's centroid, not at the midpoint of its cells' centroids: C(u_s) u plus an "
           "explicit correction s . (grad u)_f, exact for linear velocities, the face velocity it takes capped at nu / "
           "|s|; no longer skew-symmetric"),
    Option("flow_wall_normal_flux", "wall_normal_flux", True, "the two-point viscous flux nu A n . u_i / delta "
           "of the wall-normal velocity through no-slip walls; without it only the tangential velocity's "
           "(continuity makes the normal velocity's normal gradient zero at a wall: the two-point flux is an "
           "error of the wall cells' normal momentum, largest at a stagnation point), the normal part taken "
           "back explicitly, in the forces too; kept by default: without it the consistent scheme's delta_p "
           "on the DFG cylinders overshoots on fine meshes (BENCHMARKS.md)"),
    Option("flow_face_memory", "face_memory", False, "the face velocities keep part of their departure "
           "from the interpolated cell velocities from one step to the next, w = Gamma u^p + beta (u_s^n - "
           "Gamma u^n), beta = 1 - Fo / (1 + Fo^2) with Fo = nu dt / delta^2 the face's diffusion number "
           "(Choi 1999; as OpenFOAM's ddtCorr), so that a step's projection corrects what the step changed "
           "and only 1 - beta of what earlier steps left"),
    Option("flow_face_memory_beta", "face_memory_beta", "fourier", "the face memory's beta: fourier, 1 - Fo / "
           "(1 + Fo^2); damping, the factor by which the step's diffusion damps the mode of the face's two "
           "cells, x = dt (D_ii / Omega_i + D_jj / Omega_j): (2 - x) / (2 + x) with Crank-Nicolson, 1 - x "
           "explicit. fourier holds convective flows and lets modes of a few small cells grow where Fo is "
           "large (low Reynolds numbers on fine tetrahedra; -flow_memory_fourier keeps dt below that); "
           "damping holds those at any dt and not the convective 3D-1Z (BENCHMARKS.md)", choices=MEMORY_BETAS),
    Option("flow_implicit_rhie_chow", "implicit_rhie_chow", True, "with -flow_diffusion implicit, the "
           "pressure guess of the momentum predictor reaches the face velocities through the face gradient on "
           "each face's implicit share a / (1 + a) (a = dim nu dt / delta^2, the face's Crank-Nicolson diffusion "
           "number), so that the Rhie-Chow term's coefficient is dt / (1 + a), as OpenFOAM's rAUf; without it the "
           "guess returns through Gamma G, and on tetrahedra, where that can exceed the face gradient, a step "
           "with large a grows the pressure from the last guess's until the run blows up. On in the symmetric "
           "scheme; off in the consistent one, whose own corrections blow up at such steps with it or without"),
    Option("flow_box_grading", "box_grading", 0.0, "on a DMDA box, cells clustered at both walls of the y axis by "
           "the tanh law of channel flows with this beta (0: equal cells); such a box's pressure takes boxfft by "
           "default where x and z are periodic (Fourier transforms along them, tridiagonal solves along y), else "
           "gpuamg's aggregation (the geometric levels need equal cells)", low=0.0),
    Option("flow_forcing", "forcing", "none", "the mean flow's forcing along x (a periodic channel's): "
           "pressure_gradient, a constant body force -dP/dx = -flow_forcing_value per unit mass; flow_rate, the "
           "bulk velocity held at -flow_forcing_value after each step by one velocity added along x to every cell "
           "(the mean pressure gradient it implies reported)", choices=FORCING_KINDS),
    Option("flow_forcing_value", "forcing_value", 0.0, "-dP/dx, or the bulk velocity held, of -flow_forcing"),
    Option("flow_les", "les", "none", "subgrid model of large-eddy simulation: its eddy viscosity nu_t, from "
           "each cell's velocity gradient and the cube root of its volume, adds to nu on the interior faces "
           "(their cells' mean; walls keep nu), explicit in time (with Crank-Nicolson too: the momentum matrix keeps "
           "nu alone): smagorinsky (|S|), wale (Nicoud and "
           "Ducros 1999: none in pure shear), sigma (Nicoud et al. 2011: none in pure shear, solid-body rotation "
           "and 2D flows)", choices=("none",) + LES_MODELS),
    Option("flow_les_constant", "les_constant", 0.0, "the subgrid model's constant (0: the model's own, "
           "smagorinsky 0.1, wale 0.325, sigma 1.35)", low=0.0),
    Option("flow_box_stencils", "box_stencils", True, "on a DMDA box of equal cells on one rank with gpusell, "
           "its sides periodic or walls (symmetric scheme, no LES), apply the face operators (Ms, Gamma, Gs, G, D, "
           "the flux rate, C) from the grid instead of matrices: no matrix read, C's values never written"),
    Option("flow_cuda_graphs", "cuda_graphs", True, "replay each step as one CUDA graph while dt stays the same "
           "(it is held while its limit allows), its solves in loops the device ends (graphcg), read back once, and "
           "the next step launched before the host waits for this one: gpusell on one rank, boundary values steady "
           "in time; where a KSP is not graphcg, and on several ranks (gpusell's halos by NCCL), only the explicit "
           "part; work that cannot be captured runs as launched, with one notice"),
    Option("flow_graph_steps", "graph_steps", 64, "the most steps one launch of -flow_cuda_graphs runs with "
           "one dt, in a loop the device ends after any step the run would not take with the others (its solves "
           "not converged, its CFL number past -flow_cfl_max, a steady state, a new dt): the host launches, waits "
           "for and judges them together, the next loop launched as it takes one; no more time levels of the fields "
           "kept, one graph more to capture after each change of dt. Loops run where the run's observer reads only "
           "watched values (forces, probes), without -flow_monitor or an LES model", low=1, high=256),
    Option("flow_assembly", "assembly", "auto", "where the operators are assembled: on the host (NumPy, "
           "scipy), on the GPU (CuPy, cupyx), or auto: where gpusell keeps its matrices (-gpu_backend), on the GPU for "
           "PETSc's cusparse types where one is usable",
           choices=ASSEMBLY),
    Option("flow_t_end", "t_end", 1.0, "final time", low=0.0),
    Option("flow_max_steps", "max_steps", 10**9, "most steps to run", low=0, high=10**9),
    Option("flow_steady_tol", "steady_tol", 0.0, "stop at max |u^{n+1} - u^n| / dt below this (0: never)",
           low=0.0),
    Option("flow_velocity_scale", "velocity_scale", 1.0, "velocity that sets the first time step of a fluid "
           "at rest", above=0.0),
    Option("flow_monitor", "monitor", False, "print step, t, dt, CFL, pressure iterations, ||Ms u_s|| and "
           "kinetic energy every step"),
    Option("flow_checkpoint_every", "checkpoint_every", 0, "write a checkpoint every N steps and at the end of "
           "the run, to go on from there with -flow_restart (0: never)", low=0,
           high=10**9),
    Option("flow_checkpoint_file", "checkpoint_file", "flow_checkpoint.h5", "checkpoint file (written "
           "atomically: a temporary file, then a rename)"),
    Option("flow_restart", "restart_file", "", "start from this checkpoint; the run continues to the same "
           "result as an uninterrupted one"),
    Option("flow_cfl_max", "cfl_max", 2.0, "blow-up: a CFL number above this, an adaptive time step below "
           f"{COLLAPSE:g} of the run's first, a NaN or a failed solve stops the run, naming the step, with the "
           "last good state saved", low=0.0),
)
