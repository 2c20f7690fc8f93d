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


class GraphCache:
    """CUDA graphs of one piece of work, one per key (the addresses it reads
    and writes, and whatever else the work depends on). A key's first run
    goes eagerly (it may compile kernels, which a capture cannot), its
    second is captured, later ones replay one launch; under another
    capture (cacg's) the work is queued as it is."""

    def __init__(self, kept=8):
        self.graphs, self.warm, self.kept, self.replays = {}, set(), kept, 0

    def run(self, key, fn):
        stream = cupy.cuda.get_current_stream()
        if stream.is_capturing():
            fn()
            return
        graph = self.graphs.get(key)
        if graph is None:
            if key not in self.warm:
                self.warm.add(key)
                fn()
                return
            if len(self.graphs) >= self.kept:
                self.graphs.pop(next(iter(self.graphs)))  # the oldest
            graph = self.graphs[key] = capture(fn)
        replay(graph)
        self.replays += 1
