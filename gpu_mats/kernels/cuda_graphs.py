"""CUDA graphs: the work queued by Python code captured once and replayed by
one launch (cacg's basis build, wbilu's per-level sweeps, graphcg's blocks
and loops, the flow step's explicit part), and loops whose condition the
device decides (conditional WHILE nodes, CUDA 12.4 and later, through
NVIDIA's cuda-bindings, where CuPy has no call for them)."""

import functools

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
        except (cupy.cuda.runtime.CUDARuntimeError, cupy.cuda.driver.CUDADriverError) as exc:
            raise CaptureError(f"a call that a CUDA graph's capture cannot hold: {exc}") from exc
        finally:
            try:
                graph = stream.end_capture()
            except (cupy.cuda.runtime.CUDARuntimeError, cupy.cuda.driver.CUDADriverError) as exc:
                raise CaptureError(f"the capture ended in an error: {exc}") from exc
    return graph


@functools.cache
def conditional_loops():
    """Why a captured graph cannot hold a device-decided loop here (None: it can)."""
    try:
        from cuda.bindings import __version__ as bindings, driver
    except ImportError:
        return "NVIDIA's cuda-bindings are not installed"
    if int(bindings.split(".")[0]) < 13:
        return f"cuda-bindings {bindings} is older than 13"
    version = _checked("cuDriverGetVersion", driver.cuDriverGetVersion())
    if version < 12040:
        return f"the CUDA driver ({version}) is older than 12.4"
    return None


def while_loop(enter, body):
    """Queue ``enter(handle)``, then ``body(handle)`` again and again for as
    long as the handle's value is nonzero: one conditional WHILE node of
    the graph that the current stream is capturing, so that a replay loops
    on the device without the host. ``enter`` and ``body`` each end with a
    kernel that sets the conditional handle they are given
    (cudaGraphSetConditional). A CaptureError where conditional_loops()
    says why not."""
    _conditional("WHILE", enter, body)


def if_then(condition, body):
    """Queue ``condition(handle)``, a kernel that sets the handle, then
    ``body()`` where the handle's value is nonzero: one conditional IF node
    of the graph that the current stream is capturing (inside a WHILE
    node's body too). A CaptureError where conditional_loops() says why not."""
    _conditional("IF", condition, lambda handle: body())


def _conditional(kind, enter, body):
    """A conditional node of ``kind`` (WHILE or IF) after ``enter(handle)``, its body ``body(handle)``."""
    why = conditional_loops()
    if why is not None:
        raise CaptureError(f"a loop or branch on the device needs conditional graph nodes: {why}")
    from cuda.bindings import driver

    outer = driver.CUstream(cupy.cuda.get_current_stream().ptr)
    graph = _checked("cuStreamGetCaptureInfo", driver.cuStreamGetCaptureInfo(outer))[2]
    context = _checked("cuCtxGetCurrent", driver.cuCtxGetCurrent())
    handle = int(_checked("cuGraphConditionalHandleCreate",
                          driver.cuGraphConditionalHandleCreate(graph, context, 0, 0)))
    enter(handle)
    _, _, graph, dependencies, edges, count = _checked("cuStreamGetCaptureInfo", driver.cuStreamGetCaptureInfo(outer))
    params = driver.CUgraphNodeParams()
    params.type = driver.CUgraphNodeType.CU_GRAPH_NODE_TYPE_CONDITIONAL
    params.conditional.handle = handle
    params.conditional.type = getattr(driver.CUgraphConditionalNodeType, f"CU_GRAPH_COND_TYPE_{kind}")
    params.conditional.size = 1
    params.conditional.ctx = context
    node = _checked("cuGraphAddNode", driver.cuGraphAddNode(graph, dependencies, edges, count, params))
    _checked("cuStreamUpdateCaptureDependencies", driver.cuStreamUpdateCaptureDependencies(
        outer, [node], None, 1, driver.CUstreamUpdateCaptureDependencies_flags.CU_STREAM_SET_CAPTURE_DEPENDENCIES))
    inner = cupy.cuda.Stream(non_blocking=True)  # captures the node's body into its graph
    _checked("cuStreamBeginCaptureToGraph", driver.cuStreamBeginCaptureToGraph(
        driver.CUstream(inner.ptr), params.conditional.phGraph_out[0], None, None, 0,
        driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED))
    try:
        with inner:
            body(handle)
    finally:
        _checked("cuStreamEndCapture", driver.cuStreamEndCapture(driver.CUstream(inner.ptr)))


def record_event(event):
    """Record the CuPy ``event`` on the current stream; while that stream is
    captured, as an event record node of the graph (an external event), so
    that each replay records it and two such events time the work between
    them inside the graph. Needs NVIDIA's cuda-bindings during a capture
    (CuPy has no call for the flag)."""
    stream = cupy.cuda.get_current_stream()
    if not stream.is_capturing():
        event.record(stream)
        return
    from cuda.bindings import driver

    _checked("cuEventRecordWithFlags", driver.cuEventRecordWithFlags(
        driver.CUevent(event.ptr), driver.CUstream(stream.ptr),
        driver.CUevent_record_flags.CU_EVENT_RECORD_EXTERNAL))


def _checked(name, result):
    """A cuda-bindings call's values, or a CaptureError naming the call where it failed."""
    from cuda.bindings import driver

    error, *values = result
    if error != driver.CUresult.CUDA_SUCCESS:
        raise CaptureError(f"{name} failed: {error.name}")
    return values[0] if len(values) == 1 else tuple(values)


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
    is captured, later ones replay one launch. With ``relaunch=False`` an
    arrangement run under an earlier key is captured at its first run
    under a new one (its kernels compiled, its connections open: a run
    launched kernel by kernel costs many replays), and launched first only
    where that capture fails."""

    def __init__(self, relaunch=True):
        self.replays, self._key, self._graphs = 0, None, {}
        # the arrangements launched under the current key, and those launched under any key that counts
        # (only the current one where relaunch: the same set)
        self._launched = self._warm = set()
        self.relaunch = relaunch
        self.refused = None  # why a capture failed: the work runs uncaptured from then on

    def captured(self, key, arrangement):
        """Whether run(key, arrangement, ...) would replay a captured graph."""
        return self.refused is None and same_key(key, self._key) and arrangement in self._graphs

    def graphs(self):
        """{arrangement: graph} captured under the current key."""
        return dict(self._graphs)

    def capture_first(self, arrangement):
        """Capture ``arrangement`` at its first run (where it fails, it is
        launched): work whose kernels are compiled and whose memory is made
        before it runs, for which a run launched kernel by kernel costs far
        more than a capture."""
        self._warm.add(arrangement)

    def run(self, key, arrangement, fn):
        """fn's work for ``arrangement`` under ``key``; returns how it ran:
        "replayed", "captured" (then replayed) or "launched"."""
        if self.refused is not None:
            fn()
            return "launched"
        if not same_key(key, self._key):
            self._key, self._graphs, self._launched = key, {}, set()
            if self.relaunch:
                self._warm = self._launched
        graph, how = self._graphs.get(arrangement), "replayed"
        if graph is None and arrangement in self._warm:
            try:
                graph = self._graphs[arrangement] = capture(fn)
                how = "captured"
            except CaptureError as exc:
                if arrangement in self._launched:  # launched under this key, and still not captured
                    self.refused = str(exc)
        if graph is None:
            fn()
            self._warm.add(arrangement)
            self._launched.add(arrangement)
            return "launched"
        replay(graph)
        self.replays += 1
        return how


def same_key(a, b):
    """Keys equal item by item, objects by identity (arrays have no plain ==)."""
    if a is b:
        return True
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(same_key(x, y) for x, y in zip(a, b))
    return isinstance(a, (int, float, str)) and a == b
