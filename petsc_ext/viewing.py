"""-*_view output of the project's Python types."""

from petsc4py import PETSc


def ascii_view(viewer, lines):
    """Print ``lines`` one tab in, as PETSc's own PCView_* do; other viewers get nothing."""
    if viewer.getType() != PETSc.Viewer.Type.ASCII:
        return
    viewer.addASCIITab(1)
    for line in lines:
        viewer.printfASCII(line + "\n")
    viewer.subtractASCIITab(1)
