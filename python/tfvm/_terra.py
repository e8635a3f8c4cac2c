"""Terra for NumPy programs: ``@tfvm.terra`` (docs/terra.md).

A decorated function's calls are *steps*. The first step runs imperatively
(NumPy computes every value) while it is traced; the trace goes into a
TraceGraph (``_terra_graph``), from which a tfvm program is generated and
started as a session. Later steps *co-execute*: Python runs the function as
written, but each array operation only checks that it lies on a path of the
TraceGraph, feeds the graph the Python values it needs and the case its path
takes, and gives back a lazy array; the graph computes, and Python fetches a
value only when it needs it (``float(x)``, ``if x.sum() > 0``,
``np.asarray(x)``, a value still referenced when the step ends). An operation
off the TraceGraph cancels the session, recomputes the step's matched
operations with NumPy, goes on imperatively while tracing, merges the trace
and regenerates the program for the next step.
"""
import atexit
import contextlib
import os
import sys
import time
import weakref

import numpy as np

from . import _terra_graph as tg
from ._terra_rewrite import rewrite_function, stacks

_current = None                  # the step being run (one thread)
_SKIP_FILES = {__file__}
_live_functions = weakref.WeakSet()
FLUSH_GAP_S = 100e-6   # Python time after an operation beyond which its feeds go to the graph at once
CAUGHT_UP_S = 500e-6   # a fetch that waited longer: the graph has run out of work (the next operation's feeds go at once)


def _site():
    """The user's program point that made the operation: the code object and
    line of the first frame outside tfvm and NumPy. (Not the instruction
    offset: CPython's specialized instructions report another one once they
    have warmed up; operations on one line are told apart by the occurrence
    count.)"""
    f = sys._getframe(2)
    while True:
        code = f.f_code
        skip = _skip_code.get(code)
        if skip is None:
            skip = _skip_code[code] = code.co_filename in _SKIP_FILES or \
                f.f_globals.get("__name__", "").startswith("numpy")
        if not skip:
            return id(code), f.f_lineno
        f = f.f_back


_skip_code = {}   # code object -> whether its frames are tfvm's or NumPy's (asked once per code object)


# ---------------------------------------------------------------------------
# the operations: NumPy's meaning, the .tfg that computes it, the result type


def _cast(arg, dtype):
    expr, have = arg
    return expr if have == dtype else "cast<%s>(%s)" % (tg.TFG_DTYPES[dtype], expr)


def _emit_template(template):
    def emit(attrs, args):
        return template.format(*[_cast(a, np.dtype(attrs[0])) for a in args])
    return emit


_BINARY = {np.add: "({0} + {1})", np.subtract: "({0} - {1})", np.multiply: "({0} * {1})",
           np.true_divide: "({0} / {1})", np.maximum: "max({0}, {1})", np.minimum: "min({0}, {1})",
           np.power: "pow({0}, {1})", np.greater: "greater({0}, {1})", np.greater_equal: "greater_equal({0}, {1})",
           np.less: "less({0}, {1})", np.less_equal: "less_equal({0}, {1})", np.equal: "equal({0}, {1})",
           np.not_equal: "not_equal({0}, {1})", np.matmul: "matmul({0}, {1})"}
_UNARY = {np.negative: "neg({0})", np.absolute: "abs({0})", np.tanh: "tanh({0})", np.exp: "exp({0})",
          np.log: "log({0})", np.sqrt: "sqrt({0})", np.positive: "{0}"}
_FLOAT_ONLY = {np.tanh, np.exp, np.log, np.sqrt, np.matmul}
_EMIT = {uf: _emit_template(t) for uf, t in list(_BINARY.items()) + list(_UNARY.items())}
_UFUNC_IMPL = {uf: (lambda uf: lambda attrs, *v: uf(*v))(uf) for uf in _EMIT}
_resolved = {}


def _dtype_of(x):
    if isinstance(x, (TArray, np.ndarray, np.generic)):
        return x.dtype
    if isinstance(x, (bool, int, float)):
        return type(x)
    return None


def _shape_of(x):
    return x.shape if isinstance(x, (TArray, np.ndarray, np.generic)) else ()


def _type_key(x):
    """(dtype, shape) of an operand, arrays first (the common case)."""
    t = type(x)
    if t is TArray or t is np.ndarray:
        return x.dtype, x.shape
    return _dtype_of(x), _shape_of(x)


def _ufunc_types(uf, inputs):
    """(compute dtype, result dtype) of ufunc uf on inputs, or None when tfvm
    cannot compute it (a dtype it lacks, a mixed-type loop)."""
    key = (uf,) + tuple(_dtype_of(x) for x in inputs)
    if key not in _resolved:
        r = None
        try:
            if all(d is not None for d in key[1:]):  # (dtype == None holds for float64)
                dts = uf.resolve_dtypes(key[1:] + (None,))
                if len(set(dts[:-1])) == 1 and all(d in tg.TFG_DTYPES for d in dts) and \
                        (uf not in _FLOAT_ONLY or dts[0].kind == "f"):
                    r = dts[0], dts[-1]
        except (TypeError, ValueError, np.exceptions.DTypePromotionError):
            r = None
        _resolved[key] = r
    return _resolved[key]


_typed = {}   # (ufunc, input dtypes and shapes) -> (attrs, input dtypes, result dtype, shape), or None


def _ufunc_typed(uf, inputs):
    """What a traced ufunc call is, worked out once per ufunc and input
    types and shapes (None: NumPy computes it)."""
    key = (uf,) + tuple(map(_type_key, inputs))
    r = _typed.get(key, _typed)
    if r is not _typed:
        return r
    r = None
    types = _ufunc_types(uf, inputs)
    if types is not None:
        ct, out = types
        shapes = [_shape_of(x) for x in inputs]
        shape = None
        if uf is np.matmul:
            a, b = shapes
            if len(a) >= 2 and len(b) >= 2 and a[-1] == b[-2]:
                shape = np.broadcast_shapes(a[:-2], b[:-2]) + (a[-2], b[-1])
        else:
            try:
                shape = np.broadcast_shapes(*shapes)
            except ValueError:
                pass
        if shape is not None:
            r = (ct.str,), [ct] * len(inputs), out, shape
    _typed[key] = r
    return r


def _ufunc(uf, inputs):
    typed = _ufunc_typed(uf, inputs) if _current is not None else None
    if typed is None:
        return _host(uf, inputs, {})
    attrs, in_dtypes, out, shape = typed
    return _current.op(uf.__name__, attrs, inputs, in_dtypes, out, shape, _UFUNC_IMPL[uf], _EMIT[uf])


def _norm_axes(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    axes = axis if isinstance(axis, tuple) else (axis,)
    return tuple(sorted(a % ndim for a in axes))


_REDUCE = {"sum": (np.sum, "reduce_sum"), "mean": (np.mean, "reduce_mean"), "max": (np.max, "reduce_max")}


def _reduce(kind, x, axis=None, keepdims=False):
    npf, tfname = _REDUCE[kind]
    if not isinstance(x, TArray) or _current is None or x.ndim == 0 or \
            (kind != "max" and x.dtype.kind != "f") or not isinstance(keepdims, bool):
        return _host(npf, (x,), {"axis": axis, "keepdims": keepdims})
    axes = _norm_axes(axis, x.ndim)
    shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape) if keepdims or i not in axes)

    def emit(attrs, args):
        axes, keepdims = attrs
        return "%s(%s, [%s], keepdims = %s)" % (tfname, args[0][0], ", ".join(map(str, axes)),
                                                "true" if keepdims else "false")
    return _current.op(kind, (axes, keepdims), (x,), [None], x.dtype, shape,
                       lambda attrs, v: npf(v, axis=attrs[0], keepdims=attrs[1]), emit)


def _emit_concat(attrs, args):
    dtype, axis = np.dtype(attrs[0]), attrs[1]
    expr = _cast(args[0], dtype)
    for a in args[1:]:
        expr = "concat(%s, %s, axis = %d)" % (expr, _cast(a, dtype), axis)
    return expr


def _concatenate(arrays, axis=0, **kwargs):
    arrays = list(arrays)
    dts = [_dtype_of(a) for a in arrays]
    if kwargs or _current is None or axis is None or not arrays or any(
            not isinstance(d, np.dtype) for d in dts):
        return _host(np.concatenate, (arrays,), dict(kwargs, axis=axis))
    dtype = np.result_type(*dts)
    shapes = [a.shape for a in arrays]
    nd = len(shapes[0])
    if dtype not in tg.TFG_DTYPES or nd == 0 or any(len(s) != nd for s in shapes):
        return _host(np.concatenate, (arrays,), {"axis": axis})
    axis %= nd
    if any(s[:axis] + s[axis + 1:] != shapes[0][:axis] + shapes[0][axis + 1:] for s in shapes):
        # NumPy's error, where NumPy raises it (the graph would fail later)
        return _host(np.concatenate, (arrays,), {"axis": axis})
    shape = list(shapes[0])
    shape[axis] = sum(s[axis] for s in shapes)
    return _current.op("concatenate", (dtype.str, axis), arrays, [dtype] * len(arrays), dtype, tuple(shape),
                       lambda attrs, *v: np.concatenate(v, axis=attrs[1]), _emit_concat)


def _emit_getitem(attrs, args):
    sliced, int_axes = attrs
    expr = args[0][0]
    if sliced:
        expr = "slice(%s, %s, %s)" % (expr, args[1][0], args[2][0])
    for k, axis in sorted(enumerate(int_axes), key=lambda t: -t[1]):
        expr = "gather(%s, %s, axis = %d)" % (expr, args[3 + k][0], axis)
    return expr


def _getitem_impl(attrs, v, starts, ends, *ints):
    sliced, int_axes = attrs
    idx = [slice(int(a), int(b)) for a, b in zip(starts, ends)]
    for axis, i in zip(int_axes, ints):
        idx[axis] = int(i)
    return v[tuple(idx)]


def _getitem(x, index):
    """Basic indexing (ints, and slices with step 1) is traced, its bounds
    fed as values (so a bound Python computes does not make a new trace);
    anything else runs in NumPy on the fetched value."""
    idx = index if isinstance(index, tuple) else (index,)
    if _current is None or len(idx) > x.ndim or not all(
            isinstance(i, (int, np.integer)) and not isinstance(i, bool) or
            isinstance(i, slice) and i.step in (None, 1) for i in idx):
        return _host(np.ndarray.__getitem__, (x, index), {})
    starts, ends, int_axes, ints, shape = [], [], [], [], []
    for axis, d in enumerate(x.shape):
        i = idx[axis] if axis < len(idx) else slice(None)
        if isinstance(i, slice):
            start, stop, _ = i.indices(d)
            stop = max(stop, start)
            shape.append(stop - start)
        else:
            if not -d <= i < d:
                return _host(np.ndarray.__getitem__, (x, index), {})
            start, stop = 0, d
            int_axes.append(axis)
            ints.append(np.int64(int(i) % d))
        starts.append(start)
        ends.append(stop)
    sliced = any((a, b) != (0, d) for a, b, d in zip(starts, ends, x.shape))
    inputs = (x, np.array(starts, np.int64), np.array(ends, np.int64)) + tuple(ints)
    return _current.op("getitem", (sliced, tuple(int_axes)), inputs, [None] * len(inputs), x.dtype, tuple(shape),
                       _getitem_impl, _emit_getitem)


def _reshape(x, shape):
    shape = tuple(int(s) for s in (shape if isinstance(shape, (tuple, list)) else (shape,)))
    known = int(np.prod([s for s in shape if s != -1]))
    out = tuple(x.size // known if s == -1 and known else s for s in shape)
    if _current is None or int(np.prod(out)) != x.size or not out:
        return _host(np.reshape, (x, shape), {})
    return _current.op("reshape", shape, (x,), [None], x.dtype, out,
                       lambda attrs, v: v.reshape(attrs),
                       lambda attrs, a: "reshape(%s, [%s])" % (a[0][0], ", ".join(map(str, attrs))))


def _transpose(x, axes=None):
    perm = tuple(range(x.ndim))[::-1] if axes is None else tuple(a % x.ndim for a in axes)
    if _current is None or x.ndim < 2:
        return _host(np.transpose, (x, axes), {})
    return _current.op("transpose", perm, (x,), [None], x.dtype, tuple(x.shape[p] for p in perm),
                       lambda attrs, v: v.transpose(attrs),
                       lambda attrs, a: "transpose(%s, [%s])" % (a[0][0], ", ".join(map(str, attrs))))


def _astype(x, dtype):
    dtype = np.dtype(dtype)
    if _current is None or dtype not in tg.TFG_DTYPES:
        return _host(np.ndarray.astype, (x, dtype), {})
    return _current.op("astype", (dtype.str,), (x,), [None], dtype, x.shape,
                       lambda attrs, v: v.astype(attrs[0]),
                       lambda attrs, a: _cast(a[0], np.dtype(attrs[0])))


def _where(cond, a, b):
    dts = [_dtype_of(v) for v in (cond, a, b)]
    if _current is None or any(d is None for d in dts) or dts[0] != np.dtype(bool):
        return _host(np.where, (cond, a, b), {})
    dtype = np.result_type(*dts[1:])
    if dtype not in tg.TFG_DTYPES:
        return _host(np.where, (cond, a, b), {})
    shape = np.broadcast_shapes(*[_shape_of(v) for v in (cond, a, b)])
    return _current.op("where", (dtype.str,), (cond, a, b), [np.dtype(bool), dtype, dtype], dtype, shape,
                       lambda attrs, c, x, y: np.where(c, x, y).astype(attrs[0], copy=False),
                       lambda attrs, a: "select(%s, %s, %s)" % (a[0][0], _cast(a[1], np.dtype(attrs[0])),
                                                               _cast(a[2], np.dtype(attrs[0]))))


def _dot(a, b):
    if getattr(a, "ndim", 0) == 2 and getattr(b, "ndim", 0) == 2:
        return _ufunc(np.matmul, (a, b))
    return _host(np.dot, (a, b), {})


def _reducer(kind):
    return lambda a, axis=None, keepdims=False: _reduce(kind, a, axis, keepdims)


_FUNCTIONS = {np.concatenate: _concatenate, np.sum: _reducer("sum"), np.mean: _reducer("mean"), np.max: _reducer("max"),
              np.transpose: _transpose, np.reshape: lambda a, shape: _reshape(a, shape), np.where: _where,
              np.dot: _dot}


def _to_numpy(x):
    if isinstance(x, TArray):
        return x._materialize()
    if isinstance(x, (list, tuple)):
        return type(x)(_to_numpy(v) for v in x)
    if isinstance(x, dict):
        return {k: _to_numpy(v) for k, v in x.items()}
    return x


def _host(func, args, kwargs):
    """An operation the graph does not compute: its array inputs are fetched
    (materialized) and NumPy runs it; the result is a Python value."""
    return func(*_to_numpy(tuple(args)), **_to_numpy(kwargs))


# ---------------------------------------------------------------------------
# the proxy array


class TArray:
    """An array whose value the tfvm graph computes (or NumPy, while
    tracing); NumPy functions and operators on it are traced."""

    __slots__ = ("_step", "_ev", "_val", "shape", "dtype", "__weakref__")
    __array_priority__ = 100

    def __init__(self, step, ev, val, shape, dtype):
        self._step, self._ev, self._val = step, ev, val
        self.shape = shape if type(shape) is tuple else tuple(shape)
        self.dtype = dtype if isinstance(dtype, np.dtype) else np.dtype(dtype)

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape)))
    T = property(lambda self: _transpose(self))

    def _materialize(self):
        step = self._step
        if step is not None and (step is _current or self._val is None):
            # this step's value (a traced step records that Python read it),
            # or one an earlier co-executed step left in the graph, taken
            # when first read: the graph runs ahead of Python
            return step.materialize(self)
        return self._val

    def __array__(self, dtype=None, copy=None):
        v = self._materialize()
        return v if dtype is None else v.astype(dtype, copy=False)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method == "__call__" and not kwargs and ufunc in _EMIT:
            return _ufunc(ufunc, inputs)
        return _host(getattr(ufunc, method), inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        f = _FUNCTIONS.get(func)
        if f is not None:
            try:
                return f(*args, **kwargs)
            except TypeError:
                pass
        return _host(func, args, kwargs)

    def __getitem__(self, index):
        return _getitem(self, index)

    def __setitem__(self, index, value):
        raise TypeError("tfvm.terra arrays cannot be assigned to (write x = np.where(...) or np.concatenate)")

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __bool__(self):
        return bool(self._materialize())

    def __float__(self):
        return float(self._materialize())

    def __int__(self):
        return int(self._materialize())

    def __index__(self):
        return self._materialize().__index__()

    def __repr__(self):
        return "terra(%r)" % (self._materialize(),)

    def item(self, *args):
        return self._materialize().item(*args)

    def tolist(self):
        return self._materialize().tolist()

    def sum(self, axis=None, keepdims=False):
        return _reduce("sum", self, axis, keepdims)

    def mean(self, axis=None, keepdims=False):
        return _reduce("mean", self, axis, keepdims)

    def max(self, axis=None, keepdims=False):
        return _reduce("max", self, axis, keepdims)

    def reshape(self, *shape):
        return _reshape(self, shape[0] if len(shape) == 1 else shape)

    def transpose(self, *axes):
        return _transpose(self, (axes[0] if len(axes) == 1 else axes) or None)

    def astype(self, dtype):
        return _astype(self, dtype)

    def copy(self):
        return self      # never written: no copy needed


def _binop(uf, swap=False):
    if swap:
        return lambda self, other: _ufunc(uf, (other, self))
    return lambda self, other: _ufunc(uf, (self, other))


for _name, _uf in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("truediv", np.true_divide),
                   ("pow", np.power), ("matmul", np.matmul)):
    setattr(TArray, "__%s__" % _name, _binop(_uf))
    setattr(TArray, "__r%s__" % _name, _binop(_uf, True))
for _name, _uf in (("lt", np.less), ("le", np.less_equal), ("gt", np.greater), ("ge", np.greater_equal),
                   ("eq", np.equal), ("ne", np.not_equal)):
    setattr(TArray, "__%s__" % _name, _binop(_uf))
TArray.__hash__ = None
TArray.__neg__ = lambda self: _ufunc(np.negative, (self,))
TArray.__pos__ = lambda self: self
TArray.__abs__ = lambda self: _ufunc(np.absolute, (self,))


# ---------------------------------------------------------------------------
# a step: one call of a decorated function


class _Diverged(Exception):
    pass


class _LoopRun:
    """A folded loop being co-executed: its node, where it sits in the
    loop-id stack, the iteration and the position in the body."""

    def __init__(self, node, loops, wiring):
        self.node, self.spec, self.wiring = node, node.attrs, wiring
        self.go = "l%d" % node.id            # the channel that starts an iteration (true) or ends the loop
        self.outer, self.lid, self.depth = loops[:-1], loops[-1][0], len(loops) - 1
        self.iter, self.pos = 1, 0


@contextlib.contextmanager
def _graph_failure():
    """A run that failed (a kernel's error on values NumPy would take
    otherwise, say) is one more divergence: NumPy recomputes the step and
    raises what NumPy raises."""
    from . import Error
    try:
        yield
    except Error as e:
        raise _Diverged("the graph failed: %s" % str(e).splitlines()[0]) from None


def _feedable(v):
    return v[()] if v.ndim == 0 else v


class _Step:
    def __init__(self, fn, mode):
        self.fn, self.mode = fn, mode
        self.events = []             # (key, op, attrs, sig, dtype, ndim, emit, inputs, impl)
        self.proxies = []            # weakref per event
        self.occurrences = {}
        self.fetched = {}            # event -> value Python read
        self.errors = {}             # event -> NumPy's error, for an ended step whose graph failed
        self.path, self.last_run, self.prev, self.selected = [], {}, tg.START, set()
        # the loop being run; finished loops' last iteration; what the last gap is timed for
        self.loop, self.loop_done, self.gap_key = None, {}, tg.START
        self.channels, self.taken = {}, {}     # fetch channel -> its events this step; how many taken
        self.pending, self.go = [], mode == "coexec"   # feeds not yet handed to the session
        self.t_last = time.perf_counter()

    def flush(self):
        """Hands the queued feeds to the session, `go` last: a value queued
        before the graph waits for it costs no wake-up (a tenth of a feed
        that wakes a waiting graph, on a busy machine)."""
        s, rec = self.fn.live_session(), self.fn.recording
        with _graph_failure():
            for ch, v in self.pending:
                s.feed(ch, v)        # the extension's own session: one host thread needs no lock
            if rec is not None:
                rec.extend(self.pending)
            self.pending.clear()
            if self.go:
                s.feed("go", True)
                self.go = False
                if rec is not None:
                    rec.append(("go", True))

    def fetch(self, ch):
        lag = self.fn.lagged
        if lag is not None and lag is not self:
            lag.take_channel(ch)     # the earlier step's values on ch come first
        if self.go or self.pending:
            self.flush()
        t = time.perf_counter()
        with _graph_failure():
            val = self.fn.live_session().fetch(ch)
        waited = time.perf_counter() - t
        self.fn.stats["python_wait_s"] += waited
        if waited > CAUGHT_UP_S:
            self.fn.caught_up = True
        return val

    def op(self, name, attrs, inputs, in_dtypes, dtype, shape, impl, emit, site=None):
        sig, refs = [], []
        for x, dt in zip(inputs, in_dtypes):
            if type(x) is TArray and x._step is self:
                sig.append("n")
                refs.append(("n", x._ev))
            else:
                v = _to_numpy(x)
                v = np.asarray(v, dtype=dt if dt is not None else getattr(v, "dtype", None))
                if v.dtype not in tg.TFG_DTYPES:
                    return _host(lambda *a: impl(attrs, *a), inputs, {})
                # short i64 vectors (index bounds) keep their length: tfvm's slice needs it
                sig.append((v.dtype.str, v.ndim, len(v)) if v.dtype == np.int64 and v.ndim == 1 and len(v) <= 8
                           else (v.dtype.str, v.ndim))
                refs.append(("v", v))
        if not isinstance(dtype, np.dtype):
            dtype = np.dtype(dtype)
        calls, loops = stacks.where()
        sig = tuple(sig)
        base = (name, attrs, sig, dtype.str, len(shape), calls, loops, site or _site())
        k = self.occurrences.get(base, 0)
        self.occurrences[base] = k + 1
        key = base + (k,)
        ev = len(self.events)
        val = None
        if self.mode == "coexec":
            try:
                self._follow(key, refs)
            except _Diverged as e:
                self.diverge(str(e))
        if self.mode == "trace":
            t = time.perf_counter()
            val = impl(attrs, *[self.value(r) if kind == "n" else r for kind, r in refs])
            val = np.asarray(val)
            self.fn.traced_work_s += time.perf_counter() - t
            if val.dtype != dtype or val.shape != tuple(shape):
                # the result type rule did not hold: this operation stays NumPy's
                for kind, r in refs:
                    if kind == "n":
                        self.fetched.setdefault(r, self.value(r))
                return val
        self.events.append((key, name, attrs, sig, dtype, len(shape), emit, refs, impl))
        p = TArray(self, ev, val, shape, dtype)
        self.proxies.append(weakref.ref(p))
        return p

    def value(self, ev):
        p = self.proxies[ev]()
        return p._val if p is not None and p._val is not None else self.fetched[ev]

    def _follow(self, key, refs):
        """Checks the operation against the TraceGraph and the wiring of the
        generated graph, and queues what its node needs (its Python values,
        the case its path takes, a loop's next iteration)."""
        lp = self.loop
        if lp is not None:
            loops = key[6]
            if len(loops) == lp.depth + 1 and loops[:-1] == lp.outer and loops[-1][0] == lp.lid:
                return self._follow_body(key, refs, loops[-1][1])
            self._exit_loop()
        g = self.fn.graph
        n = g.node(key)
        if n is None:
            n = self._enter_loop(key)
            if n is not None:
                return self._follow_body(key, refs, 1)
            raise _Diverged("a new operation")
        v = n.id
        self._take_edge(v)
        feeds, fetched, out = self.fn.wiring(v)
        for j, ref in enumerate(refs):
            if ref[0] == "n":
                self._check_input(v, j, self.path[ref[1]])
        for j, ref in enumerate(refs):
            if ref[0] == "v":
                self.pending.append((feeds[j], _feedable(ref[1])))
        self._ran(v, v, fetched, out)

    def _take_edge(self, v):
        if (self.prev, v) not in self.fn.graph.edges:
            raise _Diverged("a new path")
        for ch, c in self.fn.plan.select.get((self.prev, v), ()):
            self.pending.append((ch, np.int32(c)))
            self.selected.add(ch)
        self.prev = v

    def _check_input(self, v, j, actual):
        """The producer the program reads for input j of node v must be the
        one Python used: a node, or a finished loop's last iteration."""
        if len(actual) == 3:
            if self.loop_done.get(actual[0]) != actual[2]:
                raise _Diverged("a new data flow")
            actual = actual[:2]
        actual = actual[0] if len(actual) == 1 else actual
        prods = self.fn.graph.producers.get((v, j), ())
        if actual not in prods or len(prods) > 1 and \
                max(prods, key=lambda p: self.last_run.get(p, -1)) != actual:
            raise _Diverged("a new data flow")

    def _ran(self, where, producer, fetched, channel):
        """Records the event's place (path) and its fetch channel, and flushes
        the feeds when Python worked a while after it last time."""
        fn, now = self.fn, time.perf_counter()
        fn.gaps[self.gap_key] = now - self.t_last       # Python's time after the previous operation
        self.t_last, self.gap_key = now, producer
        ev = len(self.path)
        self.path.append(where if isinstance(where, tuple) else (where,))
        self.last_run[producer] = ev
        if fetched:
            self.channels.setdefault(channel, []).append(ev)
        if fn.caught_up or fn.gaps.get(producer, 0.0) > FLUSH_GAP_S:
            # the graph waits for this operation (Python just waited for the
            # graph a while), or Python works a while before its next one:
            # let the graph run meanwhile
            fn.caught_up = False
            self.flush()

    def _enter_loop(self, key):
        loops = key[6]
        if not loops or loops[-1][1] != 1:
            return None
        g, nk = self.fn.graph, tg.norm_key(key)
        # loops that start alike differ in their data flow, known only later:
        # the one that last ran to its end is tried first, then the newest
        candidates = sorted(g.loop_entries.get(nk, ()), reverse=True)
        candidates.sort(key=lambda L: L != self.fn.loop_preferred.get(nk))
        for L in candidates:
            if (self.prev, L) in g.edges:
                self._take_edge(L)
                self.loop = _LoopRun(g.by_id[L], loops, self.fn.loop_wiring(L))
                self.pending.append((self.loop.go, True))
                return g.by_id[L]
        return None

    def _exit_loop(self):
        lp, self.loop = self.loop, None
        if lp.pos != len(lp.spec.entries):
            raise _Diverged("a new path")          # an iteration left part-way
        self.pending.append((lp.go, False))
        self.fn.loop_preferred[lp.spec.keys[0]] = lp.node.id
        self.loop_done[lp.node.id] = lp.iter
        for p in range(len(lp.spec.entries)):
            self.last_run[(lp.node.id, p)] = len(self.path)

    def _follow_body(self, key, refs, counter):
        lp, L = self.loop, self.loop.node.id
        n = len(lp.wiring)
        if lp.pos == n and counter == lp.iter + 1:
            lp.iter, lp.pos = counter, 0
            self.pending.append((lp.go, True))
        p = lp.pos
        if counter != lp.iter or p == n:
            raise _Diverged("a new path")
        # the key is the body's normalized key but for this loop's counter,
        # which the caller checked: compare the rest without building it
        head, tail, pats, feeds, producer, fetched, out = lp.wiring[p]
        if key[:6] != head or key[7:] != tail:
            raise _Diverged("a new path")
        for k, (ref, pat) in enumerate(zip(refs, pats)):
            if pat[0] == "v":
                self.pending.append((feeds[k], _feedable(ref[1])))
                continue
            actual = self.path[ref[1]]
            if pat[0] == "in":
                ok = actual == (L, pat[1], lp.iter)
            elif pat[0] == "carry" and lp.iter > 1:
                ok = actual == (L, pat[1], lp.iter - 1)
            else:
                self._check_input(L, pat[2] if pat[0] == "carry" else pat[1], actual)
                ok = True
            if not ok:
                raise _Diverged("a new data flow")
        lp.pos += 1
        self._ran((L, p, lp.iter), producer, fetched, out)

    def materialize(self, p):
        ev = p._ev
        if ev in self.fetched:
            return self.fetched[ev]
        if self is not _current:
            return self.drain_one(p)
        if self.mode == "coexec":
            try:
                self.fetch_through(self._channel_of(ev), ev)
            except _Diverged as e:
                self.diverge(str(e))
        self.fetched[ev] = p._val
        return p._val

    def _channel_of(self, ev):
        """The fetch channel that has event ev's value."""
        where = self.path[ev]
        ch = "o%d" % where[0] if len(where) == 1 else "o%d_%d" % where[:2]
        if ev not in self.channels.get(ch, ()):
            raise _Diverged("a new fetch")
        return ch

    def take_channel(self, ch):
        """Takes this (ended) step's values on ch that Python has not read."""
        evs = self.channels.get(ch)
        if evs and self.taken.get(ch, 0) < len(evs):
            self._lagged_take(lambda: self.fetch_through(ch, evs[-1]))

    def drain_one(self, p):
        """The value of p, made by this step, which has ended: the graph's
        (taken from its channel now) or NumPy's if the graph failed."""
        ev = p._ev
        if p._val is None and ev not in self.errors:
            self._lagged_take(lambda: self.fetch_through(self._channel_of(ev), ev))
        if ev in self.errors:
            raise self.errors[ev]
        return p._val

    def drain(self):
        """Takes every value of this ended step that is still owed."""
        for ch in list(self.channels):
            self.take_channel(ch)

    def _lagged_take(self, take):
        """Runs take() for an ended step; if the graph failed, NumPy
        recomputes the step's values (NumPy's own error, if any, is raised
        here, where the value is read) and the session is gone."""
        try:
            take()
        except _Diverged as e:
            fn = self.fn
            if fn.lagged is self:
                fn.lagged = None
            fn.cancel(reason=str(e))
            fn.stats["fallbacks"] += 1
            fn.fallback_reasons.append(str(e))
            self.channels.clear()
            self.recompute(defer=True)

    def fetch_through(self, ch, ev):
        """Takes channel ch's values in order up to event ev's (a loop's
        channel has one per iteration)."""
        evs = self.channels[ch]
        while self.taken.get(ch, 0) <= evs.index(ev):
            e = evs[self.taken.get(ch, 0)]
            self.taken[ch] = self.taken.get(ch, 0) + 1
            val = np.asarray(self.fetch(ch), dtype=self.events[e][4])
            self.fetched[e] = val
            q = self.proxies[e]()
            if q is not None:
                q._val = val

    def diverge(self, reason):
        """Cancels the graph and recomputes the step's operations so far with
        NumPy (values Python already read are kept), then goes on tracing."""
        self.fn.drain_lagged()
        self.fn.cancel()
        self.pending.clear()
        self.mode = "trace"
        self.fn.stats["fallbacks"] += 1
        self.fn.fallback_reasons.append(reason)
        self.recompute()

    def recompute(self, defer=False):
        """NumPy computes every operation of the step whose value Python
        has not read, from the recorded inputs. defer (an ended step): an
        operation NumPy refuses keeps its error, raised when its value, or
        one computed from it, is read."""
        vals = []
        for ev, e in enumerate(self.events):
            impl, refs = e[8], e[7]
            if ev in self.fetched:
                v = self.fetched[ev]
            else:
                failed = [self.errors[r[1]] for r in refs if r[0] == "n" and r[1] in self.errors]
                try:
                    if failed:
                        raise failed[0]
                    v = np.asarray(impl(e[2], *[vals[r[1]] if r[0] == "n" else r[1] for r in refs]))
                except Exception as exc:  # noqa: BLE001 - NumPy's own error, kept for the reader
                    if not defer:
                        raise
                    self.errors[ev], v = exc, None
            vals.append(v)
            p = self.proxies[ev]()
            if p is not None and p._val is None:
                p._val = v

    def end(self):
        """The function returned: its path must end here in the TraceGraph."""
        if self.mode == "coexec":
            try:
                if self.loop is not None:
                    self._exit_loop()
                if (self.prev, tg.END) not in self.fn.graph.edges:
                    raise _Diverged("a new end")
                for ch in self.fn.plan.conditional:
                    if ch not in self.selected:
                        self.pending.append((ch, np.int32(-1)))
                # (a graph that failed since the last feed refuses these:
                # that is a divergence like any other, whichever comes first)
                self.flush()
            except _Diverged as e:
                self.diverge(str(e))

    def finish(self):
        """Values still referenced stay in the graph, which runs on: each
        must have a fetch channel (else the graph will fetch it from now
        on), and they are taken when Python reads them or at the end of the
        next step (so the graph is at most a step behind Python). A traced
        step's values are all NumPy's; its trace is merged into the
        TraceGraph."""
        if self.mode == "coexec":
            try:
                for ev, r in enumerate(self.proxies):
                    p = r()
                    if p is not None and p._val is None:
                        self._channel_of(ev)
            except _Diverged as e:
                self.diverge(str(e))
        self.fn.drain_lagged()
        if self.mode == "coexec":
            self.fn.stats["coexec_steps"] += 1
            self.fn.lagged = self
        else:
            for ev, r in enumerate(self.proxies):
                p = r()
                if p is not None:
                    p._materialize()
            self.fn.stats["traced_steps"] += 1
            events, fetched = self.events, set(self.fetched)
            if self.fn.fold_loops:
                events, fetched = tg.fold_loops(events, fetched)
            if self.fn.graph.merge(events, fetched):
                self.fn.dirty = True
            for e in events:          # the loops this trace ran are the ones to try first
                if e[1] == "loop":
                    self.fn.loop_preferred[e[2].keys[0]] = self.fn.graph.node(e[0]).id


# ---------------------------------------------------------------------------
# the decorator


class TerraFunction:
    """A ``@tfvm.terra`` function: call it like the function. ``stats``
    counts traced and co-executed steps, fallbacks and the time Python waited
    for fetches; ``source`` is the current generated program; ``close()``
    ends its session."""

    def __init__(self, f, threads=0, fold_loops=True):
        self.f, self.threads, self.fold_loops = f, threads, fold_loops
        self.__name__, self.__doc__, self.__wrapped__ = f.__name__, f.__doc__, f
        self.graph, self.plan, self.program, self.session = tg.TraceGraph(), None, None, None
        self.dirty, self.disabled = False, None
        self.lagged = None        # the last co-executed step, while the graph owes Python its values
        self.caught_up = False    # Python's last fetch waited long for the graph (_Step.fetch)
        self.lost = None          # why the session ended under a co-executed step
        self.gaps = {}            # node -> Python's time after it, last co-executed step
        self.loop_preferred = {}  # a loop body's first key -> the loop node that last ran to its end
        self.recording = None     # a list: co-executed steps' feeds go there, in order (bench/terra.py)
        self.traced_work_s = 0.0  # traced steps: NumPy's time in the traced operations,
        self.traced_step_s = 0.0  # and the steps' whole time
        self.session_threads = 0  # the last session's workers
        self.fallback_reasons = []
        self._wiring = {}         # node id -> wiring(node id), for the current program
        self.stats = {"traced_steps": 0, "coexec_steps": 0, "fallbacks": 0, "compiles": 0, "python_wait_s": 0.0}
        _live_functions.add(self)

    @property
    def source(self):
        return self.plan.source if self.plan else None

    def loop_wiring(self, L):
        """Per body position of loop node L: its normalized key but for the
        loop-id stack (before and after it), the inputs' data flow, the feed
        channel per input, its producer, whether the program fetches it and
        its fetch channel: worked out once per program."""
        w = self._wiring.get(("loop", L))
        if w is None:
            spec, fetched = self.graph.by_id[L].attrs, self.graph.fetched
            w = self._wiring[("loop", L)] = [
                (k[:6], k[7:], e[6], tuple("i%d_%d_%d" % (L, p, j) for j in range(len(e[6]))), (L, p),
                 (L, p) in fetched, "o%d_%d" % (L, p)) for p, (k, e) in enumerate(zip(spec.keys, spec.entries))]
        return w

    def wiring(self, v):
        """Node v's feed channel per input, whether the program fetches it,
        and its fetch channel: worked out once per program."""
        w = self._wiring.get(v)
        if w is None:
            n = self.graph.by_id[v]
            w = self._wiring[v] = (tuple("i%d_%d" % (v, j) for j in range(len(n.sig))), v in self.graph.fetched,
                                   "o%d" % v)
        return w

    def _prepare(self):
        from . import compile as tfvm_compile, Error
        if self.dirty or self.plan is None:
            self.drain_lagged()
            self.cancel()
            try:
                self.plan, self._wiring = tg.generate(self.graph), {}
                self.program = tfvm_compile(self.plan.source, name="terra_%s.tfg" % self.__name__)
            except (tg.GraphError, Error) as e:
                self.disabled, self.plan = str(e), None
                return False
            self.dirty = False
            self.stats["compiles"] += 1
        if self.session is None:
            self.session_threads = self.workers()
            self.session = self.program.session(threads=self.session_threads)
        return True

    def workers(self):
        """The session's worker count: `threads`, or by default, when the
        array work was at least half of the traced steps' time (the graph is
        the step's critical path, and the interpreter mostly waits for it),
        one per core that other processes leave free now (at least one): a
        product split across workers waits for the part whose worker another
        process holds. Otherwise one core fewer than the machine has (at
        least one): Python's own work is the critical path, and a worker
        sharing its core slows it."""
        if self.threads:
            return self.threads
        cores = _cores()
        if cores > 1 and self.traced_work_s >= 0.5 * self.traced_step_s:
            return max(1, min(cores, round(_free_cores(cores))))
        return max(1, cores - 1)

    def live_session(self):
        """The session's extension object (Terra feeds and fetches from one
        thread: no lock needed), or a divergence when it is gone."""
        if self.session is None:
            raise _Diverged(self.lost or "the graph failed: the session has ended")
        return self.session._s

    def drain_lagged(self):
        """Takes the values the graph owes from the last co-executed step."""
        lag, self.lagged = self.lagged, None
        if lag is not None:
            lag.drain()

    def cancel(self, reason=None):
        self.lost = reason
        if self.session is not None:
            s, self.session = self.session, None
            s.cancel()

    def close(self):
        """Ends the session (the graph's loop stops), once every value it
        owes Python has been taken."""
        self.drain_lagged()
        if self.session is not None:
            s, self.session = self.session, None
            s.feed("go", False)
            s.finish()

    def __call__(self, *args, **kwargs):
        global _current
        g = rewrite_function(self.f)
        if _current is not None:          # called from another step: part of it
            return g(*args, **kwargs)
        coexec = self.graph.traces > 0 and not self.disabled and self._prepare()
        step = _Step(self, "coexec" if coexec else "trace")
        _current = step
        t0 = time.perf_counter()
        try:
            wrapped = [step.op("arg", (), (a,), [None], a.dtype, a.shape, _identity, _emit_identity, ("arg", i))
                       if isinstance(a, np.ndarray) and a.dtype in tg.TFG_DTYPES else a for i, a in enumerate(args)]
            out = g(*wrapped, **kwargs)
            del wrapped
            step.end()
            out = _to_numpy(out)
            if step.mode == "trace":
                self.traced_step_s += time.perf_counter() - t0
            step.finish()
        except BaseException:
            if step.mode == "coexec":
                try:
                    self.drain_lagged()      # the earlier step's values may still be read
                finally:
                    self.cancel()
            raise
        finally:
            _current = None
        return out


def _cores():
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _cpu_times():
    """(idle, total) clock ticks of every CPU since boot, from /proc/stat."""
    with open("/proc/stat") as f:
        ticks = [int(t) for t in f.readline().split()[1:]]
    return ticks[3] + ticks[4], sum(ticks[:8])     # idle + iowait; user .. steal


def _free_cores(cores, window_s=0.1):
    """How many of the cores other processes leave idle now: /proc/stat's
    idle time over `window_s` while this thread sleeps (the load average
    lags by a minute); where there is no /proc/stat, the cores less the
    load average."""
    try:
        idle0, total0 = _cpu_times()
        time.sleep(window_s)
        idle1, total1 = _cpu_times()
        return cores * (idle1 - idle0) / max(total1 - total0, 1)
    except (OSError, ValueError, IndexError):
        try:
            return max(cores - os.getloadavg()[0], 0.0)
        except (AttributeError, OSError):
            return cores


def _identity(attrs, v):
    return v


def _emit_identity(attrs, args):
    return args[0][0]


def terra(f=None, *, threads=0, fold_loops=True):
    """Decorator: runs f's NumPy work as a tfvm graph beside f's Python
    (docs/terra.md). ``@tfvm.terra`` or ``@tfvm.terra(threads=2)`` (default:
    the free cores when the traced steps were mostly array work, else one
    fewer than the cores);
    ``fold_loops=False`` unrolls every loop."""
    if f is None:
        return lambda f: TerraFunction(f, threads, fold_loops)
    return TerraFunction(f, threads, fold_loops)


@atexit.register
def _close_all():
    for f in list(_live_functions):
        try:
            f.cancel()
        except Exception:  # noqa: BLE001 - exiting anyway
            pass
