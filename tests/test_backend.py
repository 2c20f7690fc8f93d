"""Backend choice: the data decides, -gpu_backend overrides, failures are clear."""

import numpy
import pytest

from gpu_mats import backend


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(backend, "cupy_status", lambda: (None, "no CUDA device is visible"))
    monkeypatch.setattr(backend, "_notified", False)


def test_unknown_backend_lists_the_valid_ones():
    with pytest.raises(backend.BackendError, match="unknown GPU backend 'cuda': valid values are auto, cupy, numpy"):
        backend.resolve("cuda")


def test_cupy_without_a_gpu_is_an_error(no_gpu):
    with pytest.raises(backend.BackendError, match="'cupy' was requested but cannot be used: no CUDA device is visible"):
        backend.resolve("cupy")


def test_auto_falls_back_to_numpy_with_one_notice(no_gpu):
    notices = []
    assert backend.resolve("auto", notify=notices.append) is numpy
    assert backend.resolve("auto", notify=notices.append) is numpy
    assert notices == ["petsc-gpu-fv: no usable GPU (no CUDA device is visible); using the NumPy backend"]


def test_a_veto_counts_as_no_gpu(monkeypatch):
    monkeypatch.setattr(backend, "cupy_status", lambda: (object(), ""))
    with pytest.raises(backend.BackendError, match="built without CUDA"):
        backend.resolve("cupy", unavailable_reason="this PETSc was built without CUDA")
    assert backend.resolve("numpy") is numpy


def test_array_module_follows_the_data():
    assert backend.array_module(numpy.zeros(3)) is numpy
    with pytest.raises(TypeError, match="expected a NumPy or CuPy array, got list"):
        backend.array_module([1.0])
