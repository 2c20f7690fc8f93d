"""Where new objects keep their data: the ``-gpu_backend`` choice, and CuPy
working on PETSc's device and CUDA stream, so that our kernels see PETSc's
memory (one GPU per MPI rank: PETSc chooses which) and run in order with
PETSc's own."""

import functools

import numpy
from petsc4py import PETSc

from gpu_mats import BACKENDS, resolve
from gpu_mats.backend import cupy_status

from . import libpetsc as lp
from .options import OptionsReader


class UnsupportedScalarType(TypeError):
    petsc_code = lp.PETSC_ERR_SUP


def check_scalar_type(dtype):
    """The kernels compute in real double precision; PETSc must too."""
    if numpy.dtype(dtype) != numpy.float64:
        raise UnsupportedScalarType(f"petsc-gpu-fv needs a PETSc configured with real double-precision scalars; "
                        f"this PETSc uses {numpy.dtype(dtype).name}")


def gpu_available():
    """Whether ``-gpu_backend auto`` finds a GPU (CuPy, a device and a PETSc
    with CUDA); says nothing. Programs choose their defaults by it."""
    return PETSc.Sys.hasExternalPackage("cuda") and cupy_status()[0] is not None


_help_shown = []  # -help lists the backend option once, not once per matrix


def choose_backend():
    """The array module (numpy or cupy) for a new object, from ``-gpu_backend``."""
    check_scalar_type(PETSc.ScalarType)
    choice = OptionsReader("", "GPU backend", show_help=not _help_shown).choice(
        "gpu_backend", "auto", BACKENDS, "where petsc-gpu-fv keeps matrices and runs kernels")
    _help_shown.append(True)
    veto = "" if PETSc.Sys.hasExternalPackage("cuda") else "this PETSc was built without CUDA"
    xp = resolve(choice, unavailable_reason=veto, notify=PETSc.Sys.Print)
    if xp is not numpy:
        use_petsc_device_and_stream()
    return xp


@functools.cache
def use_petsc_device_and_stream():
    """CuPy's current device and stream from now on: PETSc's (on a host of several GPUs, this rank's). Before
    the first array: CuPy's default is device 0 on every rank."""
    import cupy

    cupy.cuda.Device(PETSc.DeviceContext.getCurrent().getDevice().getDeviceId()).use()
    stream = lp.current_stream()
    if stream:
        cupy.cuda.ExternalStream(stream).use()
