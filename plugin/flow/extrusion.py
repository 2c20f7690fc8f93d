"""The layers of a mesh extruded along one axis: which cell is each
column's in each layer (gpu_mats.extruded's ``order``), found from the cell
centres, or an ExtrusionError that says which layer or spacing differs."""

import numpy
import scipy.spatial

from gpu_mats.extruded import ExtrusionError

TOLERANCE = 1e-8  # relative to the mesh's extent: centroids closer than this are one


def layer_order(x, axis=2):
    """(layers, columns): the cells of centres ``x`` (cells, d) by layer
    along ``axis`` (rising) and by column (their centres' other
    coordinates, the same in every layer), for a mesh of equal layers
    equally spaced."""
    extent = float(numpy.ptp(x, axis=0).max()) or 1.0
    height = x[:, axis]
    rising = numpy.argsort(height, kind="stable")
    starts = numpy.concatenate(([0], numpy.flatnonzero(numpy.diff(height[rising]) > TOLERANCE * extent) + 1))
    counts = numpy.diff(numpy.concatenate((starts, [len(x)])))
    if (counts != counts[0]).any():
        layer = int(numpy.flatnonzero(counts != counts[0])[0])
        raise ExtrusionError(f"layer {layer} along {'xyz'[axis]} (at {height[rising[starts[layer]]]:.6g}) has "
                             f"{counts[layer]} cells where layer 0 has {counts[0]}: not an extrusion in equal layers")
    levels = height[rising[starts]]
    spacing = numpy.diff(levels)
    if spacing.size and float(abs(spacing - spacing[0]).max()) > TOLERANCE * extent:
        layer = int(numpy.argmax(abs(spacing - spacing[0])))
        raise ExtrusionError(f"the layers along {'xyz'[axis]} are not equally spaced: {spacing[layer]:.6g} between "
                             f"layers {layer} and {layer + 1}, {spacing[0]:.6g} between layers 0 and 1")
    others = [d for d in range(x.shape[1]) if d != axis]
    order = rising.reshape(len(levels), counts[0])
    plan = scipy.spatial.cKDTree(x[order[0]][:, others])
    for layer, row in enumerate(order[1:], start=1):  # each layer's cells by the column of layer 0 they stand on
        distance, column = plan.query(x[row][:, others])
        if float(distance.max()) > TOLERANCE * extent or numpy.unique(column).size != column.size:
            raise ExtrusionError(f"layer {layer}'s cells along {'xyz'[axis]} do not stand above layer 0's (by up "
                                 f"to {distance.max():.3g}): not an extrusion")
        row[column] = row.copy()
    return order
