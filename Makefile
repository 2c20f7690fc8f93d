# The two commands of the README. Each sets up what it needs (scripts/install.sh).
PY := .venv/bin/python
MPIEXEC := mpiexec
STAMP := .venv/.installed

.PHONY: demo test gpu-test
demo: $(STAMP)
	$(PY) demos/poisson3d.py -n 48 -dm_mat_type gpusell -ksp_type cg -pc_type jacobi -ksp_converged_reason -ksp_view

test: $(STAMP)
	$(PY) -m pytest -q -m "not gpu"
	$(MPIEXEC) -n 2 $(PY) -m pytest -q -m mpi --timeout=600
	$(MPIEXEC) -n 3 $(PY) -m pytest -q -m mpi --timeout=600

# On a machine with a GPU, CuPy and a PETSc built with CUDA (not part of CI).
gpu-test:
	python3 -m pytest -q -m gpu
	python3 -m pytest -q -m "not gpu"
	$(MPIEXEC) -n 2 python3 -m pytest -q -m mpi

$(STAMP): pyproject.toml scripts/install.sh
	./scripts/install.sh
