"""The PETSc library through ctypes, for the C calls petsc4py does not expose:
type registration, a Mat's function table, object ids and states, containers,
arrays with their memory type, PETSc's current CUDA stream, a DMPlex of mixed
cell types, and raising a PETSc error from a callback.

It binds the very ``libpetsc`` that petsc4py loaded (found in the process's
memory map), so both talk to one PETSc.
"""

import ctypes

import numpy
from mpi4py import MPI
from petsc4py import PETSc

PETSC_ERR_SUP = 56
PETSC_ERR_ARG_SIZ = 60
PETSC_ERR_ARG_WRONG = 62
PETSC_ERR_ARG_OUTOFRANGE = 63
PETSC_ERR_PYTHON = 101
PETSC_ERROR_INITIAL = 0

# PetscMemType: host is 0, every device memory type is nonzero.
PETSC_MEMTYPE_HOST = 0

# MatOperation values (petscmat.h)
MATOP_MULT = 3
MATOP_MULT_ADD = 4
MATOP_MULT_TRANSPOSE = 5
MATOP_MULT_TRANSPOSE_ADD = 6
MATOP_GET_DIAGONAL = 17
MATOP_ASSEMBLY_END = 21
MATOP_DUPLICATE = 34
MATOP_VIEW = 61
MATOP_CONVERT_FROM = 62
MATOP_SET_FROM_OPTIONS = 73


def _loaded_library_path():
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if path.rsplit("/", 1)[-1].startswith("libpetsc.so"):
                return path
    raise ImportError("petsc4py is imported but no libpetsc.so is mapped in this process")


lib = ctypes.CDLL(_loaded_library_path())

c_int, c_ptr, c_str = ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p
c_petscint = numpy.ctypeslib.as_ctypes_type(PETSc.IntType)
c_comm = ctypes.c_int if MPI._sizeof(MPI.Comm) == 4 else ctypes.c_void_p
COMM_SELF = MPI._handleof(MPI.COMM_SELF)

# Function-pointer types of the callbacks PETSc calls.
CreateFn = ctypes.CFUNCTYPE(c_int, c_ptr)                       # (Mat)
MatVecFn = ctypes.CFUNCTYPE(c_int, c_ptr, c_ptr, c_ptr)         # (Mat, Vec, Vec)
MatVecVecFn = ctypes.CFUNCTYPE(c_int, c_ptr, c_ptr, c_ptr, c_ptr)
MatIntFn = ctypes.CFUNCTYPE(c_int, c_ptr, c_int)                # (Mat, enum)
MatPtrFn = ctypes.CFUNCTYPE(c_int, c_ptr, c_ptr)                # (Mat, object)


def _proto(name, *argtypes):
    fn = getattr(lib, name)
    fn.argtypes, fn.restype = list(argtypes), c_int
    return fn


MatRegister = _proto("MatRegister", c_str, c_ptr)
MatRegisterRootName = _proto("MatRegisterRootName", c_str, c_str, c_str)
PetscFunctionListFind_Private = _proto("PetscFunctionListFind_Private", c_ptr, c_str, ctypes.POINTER(c_ptr))
MatSetOperation = _proto("MatSetOperation", c_ptr, c_int, c_ptr)
MatGetOperation = _proto("MatGetOperation", c_ptr, c_int, ctypes.POINTER(c_ptr))
MatGetNonzeroState = _proto("MatGetNonzeroState", c_ptr, ctypes.POINTER(ctypes.c_int64))
PetscObjectStateGet = _proto("PetscObjectStateGet", c_ptr, ctypes.POINTER(ctypes.c_int64))
PetscObjectGetId = _proto("PetscObjectGetId", c_ptr, ctypes.POINTER(ctypes.c_int64))
PetscObjectDereference = _proto("PetscObjectDereference", c_ptr)
PetscContainerCreate = _proto("PetscContainerCreate", c_comm, ctypes.POINTER(c_ptr))
PetscObjectChangeTypeName = _proto("PetscObjectChangeTypeName", c_ptr, c_str)
DMGetMatType = _proto("DMGetMatType", c_ptr, ctypes.POINTER(c_str))
MatSeqAIJGetArray = _proto("MatSeqAIJGetArray", c_ptr, ctypes.POINTER(c_ptr))
MatSeqAIJRestoreArray = _proto("MatSeqAIJRestoreArray", c_ptr, ctypes.POINTER(c_ptr))
MatMPIAIJGetSeqAIJ = _proto("MatMPIAIJGetSeqAIJ", c_ptr, ctypes.POINTER(c_ptr), ctypes.POINTER(c_ptr),
                            ctypes.POINTER(c_ptr))
PCRegister = _proto("PCRegister", c_str, c_ptr)
KSPRegister = _proto("KSPRegister", c_str, c_ptr)
PCPythonSetType = _proto("PCPythonSetType", c_ptr, c_str)
KSPPythonSetType = _proto("KSPPythonSetType", c_ptr, c_str)
VecGetLocalSize = _proto("VecGetLocalSize", c_ptr, ctypes.POINTER(c_petscint))
_ARRAY = (ctypes.POINTER(c_ptr), ctypes.POINTER(c_int))
VecGetArrayReadAndMemType = _proto("VecGetArrayReadAndMemType", c_ptr, *_ARRAY)
VecRestoreArrayReadAndMemType = _proto("VecRestoreArrayReadAndMemType", c_ptr, ctypes.POINTER(c_ptr))
VecGetArrayWriteAndMemType = _proto("VecGetArrayWriteAndMemType", c_ptr, *_ARRAY)
VecRestoreArrayWriteAndMemType = _proto("VecRestoreArrayWriteAndMemType", c_ptr, ctypes.POINTER(c_ptr))
VecGetArrayAndMemType = _proto("VecGetArrayAndMemType", c_ptr, *_ARRAY)
VecRestoreArrayAndMemType = _proto("VecRestoreArrayAndMemType", c_ptr, ctypes.POINTER(c_ptr))
PetscDeviceContextGetCurrentContext = _proto("PetscDeviceContextGetCurrentContext", ctypes.POINTER(c_ptr))
PetscDeviceContextGetStreamHandle = _proto("PetscDeviceContextGetStreamHandle", c_ptr, ctypes.POINTER(c_ptr))
DMPlexBuildFromCellSectionParallel = _proto("DMPlexBuildFromCellSectionParallel", c_ptr, c_petscint, c_petscint,
                                            c_petscint, c_ptr, c_ptr, ctypes.POINTER(c_ptr), c_ptr)
DMPlexBuildCoordinatesFromCellListParallel = _proto("DMPlexBuildCoordinatesFromCellListParallel", c_ptr, c_petscint,
                                                    c_ptr, c_ptr)
PetscSFDestroy = _proto("PetscSFDestroy", ctypes.POINTER(c_ptr))
MatSetValuesCOO = _proto("MatSetValuesCOO", c_ptr, c_ptr, c_int)
INSERT_VALUES = 1
# Variadic: the fixed arguments are typed, the message goes through "%s".
PetscError = _proto("PetscError", c_comm, c_int, c_str, c_str, c_int, c_int, c_str)


def check(ierr):
    """Raise the PETSc error of a nonzero return code (as petsc4py does)."""
    if ierr:
        raise PETSc.Error(ierr)


def mat_operation(mat, op):
    fn = c_ptr()
    check(MatGetOperation(mat, op, ctypes.byref(fn)))
    return fn.value


_state = ctypes.c_int64()  # out-argument, made once (every gpusell MatMult reads a state)
_STATE = ctypes.byref(_state)


def local_size(vec):
    size = c_petscint()
    check(VecGetLocalSize(vec, ctypes.byref(size)))
    return size.value


def object_state(obj):
    check(PetscObjectStateGet(obj, _STATE))
    return _state.value


def object_id(obj):
    """PETSc's id of the object at ``obj``: unique in the process, and it changes
    when MatHeaderReplace or MatHeaderMerge give the handle other insides."""
    check(PetscObjectGetId(obj, _STATE))
    return _state.value


def mpiaij_blocks(mat):
    """The (diagonal, off-diagonal) SeqAIJ blocks of an MPIAIJ matrix, as handles."""
    diag, offd = c_ptr(), c_ptr()
    check(MatMPIAIJGetSeqAIJ(mat, ctypes.byref(diag), ctypes.byref(offd), None))
    return diag.value, offd.value


def new_container():
    """A new PetscContainer on PETSC_COMM_SELF as a petsc4py Object: its
    attributes (``setAttr``) live as long as the container, and are let go
    without Python when PETSc destroys it after the interpreter has exited."""
    handle = c_ptr()
    check(PetscContainerCreate(COMM_SELF, ctypes.byref(handle)))
    container = object_from_handle(handle)
    check(PetscObjectDereference(handle))  # the Python object holds the one reference
    return container


def nonzero_state(mat):
    state = ctypes.c_int64()
    check(MatGetNonzeroState(mat, ctypes.byref(state)))
    return state.value


def registered_function(list_name, name):
    """The function registered as ``name`` in PETSc's function list ``list_name`` (e.g. MatList)."""
    fn = c_ptr()
    check(PetscFunctionListFind_Private(c_ptr.in_dll(lib, list_name), name.encode(), ctypes.byref(fn)))
    if not fn.value:
        raise LookupError(f"{name} is not registered in {list_name}")
    return fn.value


def current_stream():
    """The CUDA stream of PETSc's current device context (0 is the legacy default stream)."""
    ctx, stream = c_ptr(), c_ptr()
    check(PetscDeviceContextGetCurrentContext(ctypes.byref(ctx)))
    check(PetscDeviceContextGetStreamHandle(ctx, ctypes.byref(stream)))
    return ctypes.cast(stream, ctypes.POINTER(c_ptr)).contents.value or 0


def set_error(code, function, message):
    """Push a PETSc error with ``message``; return ``code`` for the callback to return."""
    PetscError(COMM_SELF, 0, function.encode(), b"petsc_ext", code, PETSC_ERROR_INITIAL,
               b"%s", message.encode())
    return code


def _capi(name, restype, *argtypes):
    capsule = ctypes.py_object(PETSc.__pyx_capi__[name])
    ctypes.pythonapi.PyCapsule_GetName.restype = c_str
    ctypes.pythonapi.PyCapsule_GetName.argtypes = [ctypes.py_object]
    ctypes.pythonapi.PyCapsule_GetPointer.restype = c_ptr
    ctypes.pythonapi.PyCapsule_GetPointer.argtypes = [ctypes.py_object, c_str]
    address = ctypes.pythonapi.PyCapsule_GetPointer(capsule, ctypes.pythonapi.PyCapsule_GetName(capsule))
    return ctypes.PYFUNCTYPE(restype, *argtypes)(address)


# petsc4py objects for raw handles (each takes a new reference).
mat_from_handle = _capi("PyPetscMat_New", ctypes.py_object, c_ptr)
vec_from_handle = _capi("PyPetscVec_New", ctypes.py_object, c_ptr)
viewer_from_handle = _capi("PyPetscViewer_New", ctypes.py_object, c_ptr)
object_from_handle = _capi("PyPetscObject_New", ctypes.py_object, c_ptr)
