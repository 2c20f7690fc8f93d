"""CUDA graphs: the work queued by Python code captured once and replayed by
one launch (cacg's basis build, wbilu's per-level sweeps)."""

import cupy


def capture(fn):
    """A CUDA graph of the work ``fn`` queues on the current stream; fn runs
    once, on the host, while a private stream captures that work."""
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        try:
            fn()
        finally:
            graph = stream.end_capture()
    return graph


def replay(graph):
    """Launch a captured graph on the current stream."""
    graph.launch(cupy.cuda.get_current_stream())
