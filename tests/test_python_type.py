"""The base of the Python PC and KSP types (petsc_ext.python_type) and the
options machinery (petsc_ext.options): protocol methods reach PETSc as
errors, options come from the class table, defaults never touch what the
user gave."""

import numpy
import pytest
from petsc4py import PETSc

import plugin  # noqa: F401
from petsc_ext.arrays import module_for_vec_type
from petsc_ext.matrices import aij_from_csr
from petsc_ext.options import Option, option_defaults
from petsc_ext.python_type import PythonPC
from stencils import laplacian


class Scaling(PythonPC):
    """y = s x; its reset fails on request."""

    TYPE, TITLE = "scaling", "Scaling (a test type)"
    OPTIONS = (Option("pc_scaling_factor", "factor", 2.0, "the factor s", low=0.0, view="s = {}"),
               Option("pc_scaling_fail", "fail", False, "raise in reset"))

    def build(self, pc):
        self.built_on = self.xp

    def apply(self, pc, x, y):
        x.copy(y)
        y.scale(self.factor)

    def release(self):
        if self.fail:
            raise ValueError("reset failed on purpose")


def scaling_pc(options):
    A = aij_from_csr(*laplacian(3), (27, 27), comm=PETSc.COMM_SELF)
    pc = PETSc.PC().create(comm=PETSc.COMM_SELF)
    pc.setOptionsPrefix("scale_")
    pc.setOperators(A)
    pc.setType("python")
    ctx = Scaling()
    pc.setPythonContext(ctx)
    with option_defaults("scale_", options):
        pc.setFromOptions()
    return pc, ctx


def test_options_come_from_the_table_and_show_in_the_view(tmp_path):
    pc, ctx = scaling_pc({"pc_scaling_factor": 3.0})
    pc.setUp()
    assert ctx.factor == 3.0 and ctx.built_on is numpy and ctx.setup_seconds >= 0.0
    x, y = pc.getOperators()[0].createVecs()
    x.set(1.0)
    pc.apply(x, y)
    assert y.getArray()[0] == 3.0
    path = str(tmp_path / "view.txt")
    viewer = PETSc.Viewer().createASCII(path, comm=PETSc.COMM_SELF)
    pc.view(viewer)
    viewer.destroy()
    with open(path) as text:
        assert "scaling: s = 3" in text.read()


def test_out_of_range_option_is_a_petsc_error_naming_the_range():
    with pytest.raises(PETSc.Error, match="-scale_pc_scaling_factor -1 is out of range"):
        scaling_pc({"pc_scaling_factor": -1.0})


def test_a_failing_protocol_method_reaches_petsc_as_an_error():
    pc, ctx = scaling_pc({"pc_scaling_fail": True})
    with pytest.raises(PETSc.Error, match="reset failed on purpose"):
        pc.reset()
    ctx.fail = False  # let it be destroyed
    pc.destroy()


def test_every_protocol_method_of_the_project_types_is_wrapped():
    from petsc_ext.ainv import ApproximateInversePC
    from petsc_ext.cacg import CommunicationAvoidingCG
    from petsc_ext.python_type import PROTOCOL
    from petsc_ext.wbilu import WavefrontBlockILU

    for cls in (ApproximateInversePC, WavefrontBlockILU, CommunicationAvoidingCG, Scaling):
        for name in PROTOCOL:
            method = getattr(cls, name, None)
            assert method is None or getattr(method, "_petsc_wrapped", False), (cls.__name__, name)


def test_vector_types_name_the_backend():
    assert module_for_vec_type("seq") is numpy and module_for_vec_type("mpi") is numpy
    with pytest.raises(TypeError, match="not on vectors of type seqkokkos"):
        module_for_vec_type("seqkokkos")


def test_defaults_never_touch_a_value_the_user_gave():
    db = PETSc.Options()
    db["dflt_ksp_type"] = "gmres"  # the user's
    with option_defaults("dflt_", {"ksp_type": "cg", "ksp_rtol": 1e-3}):
        assert db.getString("dflt_ksp_type") == "gmres"
        assert db.getReal("dflt_ksp_rtol") == 1e-3
    assert db.getString("dflt_ksp_type") == "gmres"  # still there after the block
    assert not db.hasName("dflt_ksp_rtol")  # the default is gone
    db.delValue("dflt_ksp_type")
