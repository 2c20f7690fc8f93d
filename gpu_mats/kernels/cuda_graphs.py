"""CUDA graphs: the work queued by Python code captured once and replayed by
one launch (cacg's basis build, wbilu's per-level sweeps, graphcg's blocks,
the flow step's explicit part)."""

import cupy


class CaptureError(RuntimeError):
    """Work that a CUDA graph cannot replay: it allocated device memory while
    captured (the graph would keep the address, which the memory pool hands
    out again after the capture)."""


def _refuse(size):
    raise CaptureError(f"an allocation of {size} bytes while a CUDA graph was captured (a temporary array)")


def capture(fn):
    """A CUDA graph of the work ``fn`` queues on the current stream; fn runs
    once, on the host, while a private stream captures that work. A
    CaptureError where fn allocates device memory: none of its work is done."""
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream, cupy.cuda.using_allocator(_refuse):
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
        self.graphs, self.warm, self.kept, self.replays, self.refused = {}, set(), kept, 0, set()

    def run(self, key, fn):
        stream = cupy.cuda.get_current_stream()
        if stream.is_capturing():
            fn()
            return
        graph = self.graphs.get(key)
        if graph is None:
            if key not in self.warm or key in self.refused:
                self.warm.add(key)
                fn()
                return
            if len(self.graphs) >= self.kept:
                self.graphs.pop(next(iter(self.graphs)))  # the oldest
            try:
                graph = self.graphs[key] = capture(fn)
            except CaptureError:
                self.refused.add(key)  # this work allocates: it runs uncaptured
                fn()
                return
        replay(graph)
        self.replays += 1


class KeyedGraphs:
    """CUDA graphs of work that reads what a key names (its operators'
    arrays, its coefficients) and comes in several arrangements (its
    buffers, its length), one graph per arrangement, all dropped when the
    key changes. An arrangement's first run goes eagerly (it compiles
    kernels and opens NCCL connections, which a capture cannot), its second
    is captured, later ones replay one launch."""

    def __init__(self):
        self._key, self._graphs, self._warm, self.replays = None, {}, set(), 0
        self.refused = None  # why a capture failed: the work runs uncaptured from then on

    def run(self, key, arrangement, fn):
        if self.refused is not None:
            fn()
            return
        if not same_key(key, self._key):
            self._key, self._graphs, self._warm = key, {}, set()
        graph = self._graphs.get(arrangement)
        if graph is None and arrangement in self._warm:
            try:
                graph = self._graphs[arrangement] = capture(fn)
            except CaptureError as exc:
                self.refused = str(exc)
        if graph is None:
            fn()
            self._warm.add(arrangement)
        else:
            replay(graph)
            self.replays += 1


def same_key(a, b):
    """Keys equal item by item, objects by identity (arrays have no plain ==)."""
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(same_key(x, y) for x, y in zip(a, b))
    return a is b or (isinstance(a, (int, float, str)) and a == b)
