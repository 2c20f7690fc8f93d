# The two commands of the README. Each sets up what it needs (scripts/install.sh).
PY := .venv/bin/python
MPIEXEC := mpiexec
STAMP := .venv/.installed
# The NumPy backend works on blocks of a few columns; BLAS threads only slow those down.
export OMP_NUM_THREADS ?= 1

.PHONY: demo test gpu-test
demo: $(STAMP)
	$(PY) demos/cavity.py -flow_re 100 -da_grid_x 64 -da_grid_y 64 -flow_output_dir cavity-re100

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
