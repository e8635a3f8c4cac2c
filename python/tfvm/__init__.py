"""tfvm for Python: the tfvm dataflow VM's C API (include/tfvm.h) with NumPy
arrays in and out.

Two surfaces over one library:

* ONNX Runtime's: ``InferenceSession``, ``SessionOptions``, ``get_inputs()``,
  ``run(output_names, feed)``, ... so that a script written for ONNX Runtime
  runs with ``import tfvm as onnxruntime``;
* tfvm's own: ``tfvm.compile(...) -> Program`` with ``run``, ``session``
  (feed and fetch while the graph runs), ``save``, ``signature``, ``entries``
  and ``dis``; ``tfvm.devices()``.

Inputs that are C-contiguous arrays of a tfvm dtype are read in place (not
copied); results are arrays over tfvm's own buffers. Errors raise
subclasses of ``tfvm.Error``, one per ``tfvm_status`` code, with tfvm's
message. See docs/python.md.
"""
import enum as _enum
import os as _os
import threading as _threading
from typing import NamedTuple as _NamedTuple

import numpy as _np

from . import _tfvm

__version__ = _tfvm.version

__all__ = [
    "__version__", "compile", "devices", "Program", "Session", "Entry", "Param", "Device",
    "InferenceSession", "SessionOptions", "RunOptions", "NodeArg", "ModelMetadata",
    "GraphOptimizationLevel", "ExecutionMode", "get_available_providers", "get_all_providers",
    "get_device", "set_default_logger_severity", "terra", "TerraFunction",
    # not SyntaxError, TypeError, InterruptedError: `from tfvm import *` must not hide the builtins
    "Error", "NomemError", "IoError", "FormatError", "ArgumentError", "ShapeError", "ArithError",
    "PortError", "DeadnessError", "StuckError", "LimitError", "InternalError", "UnsupportedError",
    "DeviceError",
]

_builtin_TypeError = TypeError
_builtin_SyntaxError = SyntaxError


# ---- Errors: one class per tfvm_status, named after it ------------------------


class Error(Exception):
    """A tfvm error. ``str(e)`` is tfvm's message; ``code`` the tfvm_status
    name ("TFVM_ERR_SHAPE"); ``instr``, ``tag`` and ``where`` say which
    instruction failed, at which tag and source position ("" when unknown)."""

    code = "TFVM_ERR_INTERNAL"
    instr = ""
    tag = ""
    where = ""

    @property
    def message(self):
        return self.args[0] if self.args else ""


class NomemError(Error, MemoryError):
    """TFVM_ERR_NOMEM: an allocation failed."""


class IoError(Error, OSError):
    """TFVM_ERR_IO: a file could not be read or written."""

    def __str__(self):
        return self.message


class FormatError(Error, ValueError):
    """TFVM_ERR_FORMAT: a bad .tfvm/.npy/model file, or one that fails verification."""


class SyntaxError(Error, ValueError):  # noqa: A001 - mirrors TFVM_ERR_SYNTAX
    """TFVM_ERR_SYNTAX: text that does not parse."""


class ArgumentError(Error, ValueError):
    """TFVM_ERR_ARGUMENT: a bad argument (an input of the wrong type or shape, a
    missing or unknown name)."""


class TypeError(Error, _builtin_TypeError):  # noqa: A001 - mirrors TFVM_ERR_TYPE
    """TFVM_ERR_TYPE: a dtype mismatch at run time, or a type error in .tfg source."""


class ShapeError(Error, ValueError):
    """TFVM_ERR_SHAPE: shapes that do not fit the operation."""


class ArithError(Error, ArithmeticError):
    """TFVM_ERR_ARITH: integer division by zero, an unrepresentable cast, an overflow trap."""


class PortError(Error):
    """TFVM_ERR_PORT: two tokens for one input port at one tag."""


class DeadnessError(Error):
    """TFVM_ERR_DEADNESS: a loop or call entered partly live, partly dead."""


class StuckError(Error):
    """TFVM_ERR_STUCK: the run went quiet before a result (or a fetched value) arrived."""


class LimitError(Error):
    """TFVM_ERR_LIMIT: a configured limit was exceeded."""


class InterruptedError(Error):  # noqa: A001 - mirrors TFVM_ERR_INTERRUPTED
    """TFVM_ERR_INTERRUPTED: stopped by tfvm_interrupt (Ctrl-C raises KeyboardInterrupt instead)."""


class InternalError(Error):
    """TFVM_ERR_INTERNAL: a bug in tfvm."""


class UnsupportedError(Error):
    """TFVM_ERR_UNSUPPORTED: an op, opset or dtype tfvm does not have."""


class DeviceError(Error):
    """TFVM_ERR_DEVICE: a device is unavailable or failed."""


_ERRORS = (None, NomemError, IoError, FormatError, SyntaxError, ArgumentError, TypeError, ShapeError,
           ArithError, PortError, DeadnessError, StuckError, LimitError, InterruptedError, InternalError,
           UnsupportedError, DeviceError)
_tfvm.init(_ERRORS, _threading.main_thread().ident)

# ---- dtypes ----------------------------------------------------------------------

_NP = {"bool": _np.dtype(_np.bool_), "i8": _np.dtype(_np.int8), "u8": _np.dtype(_np.uint8),
       "i16": _np.dtype(_np.int16), "u16": _np.dtype(_np.uint16), "u32": _np.dtype(_np.uint32),
       "u64": _np.dtype(_np.uint64), "f16": _np.dtype(_np.float16),
       "i32": _np.dtype(_np.int32), "i64": _np.dtype(_np.int64), "f32": _np.dtype(_np.float32),
       "f64": _np.dtype(_np.float64)}  # bf16 has no NumPy dtype
_ORT_TYPE = {"bool": "tensor(bool)", "i8": "tensor(int8)", "u8": "tensor(uint8)", "i32": "tensor(int32)",
             "i64": "tensor(int64)", "f32": "tensor(float)", "f64": "tensor(double)", "i16": "tensor(int16)",
             "u16": "tensor(uint16)", "u32": "tensor(uint32)", "u64": "tensor(uint64)", "f16": "tensor(float16)",
             "bf16": "tensor(bfloat16)"}
_DT_NAME = {v: k for k, v in _NP.items()}


# ---- tfvm's own surface ----------------------------------------------------------


class Param(_NamedTuple):
    """A parameter or result of an entry point: its name, NumPy dtype, shape
    (a tuple with None where any size fits; None for a tensor of any rank; ()
    for a scalar), whether it is a tensor (False: a scalar value), and
    whether a parameter has a default that a call may leave it to (an ONNX
    initializer named like a graph input)."""
    name: str
    dtype: _np.dtype
    shape: tuple
    is_tensor: bool
    has_default: bool = False


class Entry(_NamedTuple):
    """An entry point: name, parameters and results (lists of Param)."""
    name: str
    params: list
    results: list


class Device(_NamedTuple):
    """A device tfvm can run on: name ("cpu", "cuda"), whether it is ready, and
    its state in tfvm's words ("ready (2 cores, OpenBLAS 0.3.21)")."""
    name: str
    available: bool
    status: str


def devices():
    """The devices tfvm knows, ready or not."""
    out = []
    for name in ("cpu", "cuda"):
        ok, text = _tfvm.device_status(name)
        out.append(Device(name, ok, text))
    return out


def _param(t):
    name, dt, shape, is_tensor, has_default = t
    return Param(name, _NP[dt], shape, is_tensor, has_default)


class Session:
    """A run that the host feeds and fetches while it runs (docs/coexec.md);
    made by Program.session(). A context manager: leaving the ``with`` block
    cancels the run unless finish() was called. Several threads may feed and
    fetch at once."""

    __slots__ = ("_s", "_cv", "_fed", "_feeder")

    def __init__(self, s):
        self._s = s
        self._cv = _threading.Condition()
        self._fed = 0          # feeds so far
        self._feeder = None    # the thread of the latest feed

    def feed(self, name, value):
        """Queue value on channel name (never blocks). Arrays and NumPy scalars
        keep their dtype; Python bool, int and float are fed as bool, i32 (i64
        when it does not fit) and f64. An array is read in place: do not
        change it while the session lives."""
        self._s.feed(name, value)
        with self._cv:
            self._fed += 1
            self._feeder = _threading.get_ident()
            self._cv.notify_all()

    def fetch(self, name, wait=None):
        """The channel's next value; blocks, without the GIL, until it comes.
        When the graph cannot go on until the host feeds, tfvm says so
        (StuckError) instead of waiting forever, as one host thread would. With
        wait=True the fetch waits for another thread's next feed instead; the
        default (None) waits once another thread has fed the session."""
        while True:
            with self._cv:
                seen = self._fed
            try:
                return self._s.fetch(name)
            except StuckError as e:
                if "but the graph waits for the host" not in str(e):
                    raise
                with self._cv:
                    me = _threading.get_ident()
                    if not (wait or (wait is None and self._feeder not in (None, me))):
                        raise
                    while self._fed == seen and self._s.active:
                        self._cv.wait()

    def finish(self):
        """Say that the host feeds no more, wait for the run's end and return its
        results (as Program.run does); the session ends."""
        try:
            return _unpack(self._s.finish())
        finally:
            self._wake()

    def cancel(self):
        """Stop the run and end the session (no-op once it has ended)."""
        self._s.cancel()
        self._wake()

    def _wake(self):
        with self._cv:
            self._cv.notify_all()

    @property
    def active(self):
        """True until finish() or cancel()."""
        return self._s.active

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.cancel()
        return False


def _unpack(results):
    if len(results) == 0:
        return None
    if len(results) == 1:
        return results[0]
    return results


class Program:
    """A loaded, verified, immutable tfvm program (made by tfvm.compile).
    Several threads may run it at once: each run takes a VM of its own."""

    __slots__ = ("_p", "_entries", "name")

    def __init__(self, p, name=""):
        self._p = p
        self._entries = None
        self.name = name

    @property
    def entries(self):
        """The entry points by name (a dict of Entry, in the program's order)."""
        if self._entries is None:
            self._entries = {n: Entry(n, [_param(p) for p in ps], [_param(r) for r in rs])
                             for n, ps, rs in self._p.entries()}
        return self._entries

    @property
    def signature(self):
        """The first entry point (the one run without entry=)."""
        return next(iter(self.entries.values()))

    def run(self, *args, entry=None, threads=0, device=None, **kwargs):
        """Run an entry point (default: the first) with positional and keyword
        arguments (by parameter name): arrays for tensor parameters, numbers
        for scalar ones. Returns None, the one result, or a tuple of results:
        arrays for tensors, Python numbers for scalars. threads: 0 =
        one per core; device: "cpu" (default), "cuda" or "auto"."""
        return _unpack(self._p.run(entry, args, kwargs or None, threads, device))

    def session(self, *args, entry=None, threads=0, device=None, **kwargs):
        """Start a run that the host feeds and fetches (a Session); arguments as for run()."""
        return Session(self._p.session(entry, args, kwargs or None, threads, device))

    def save(self, path=None):
        """Write the program as .tfvm bytecode to path; with no path, return the bytes."""
        return self._p.save(path if path is None else _os.fspath(path))

    def dis(self):
        """The instructions as text, one per line, as `tfvm dis` prints them."""
        return self._p.dis()

    def __repr__(self):
        return "<tfvm.Program %r: %s>" % (self.name, ", ".join(self.entries))


_FORMATS = ("auto", "tfvm", "tfasm", "tfg", "onnx", "pb")


def compile(source, entry=None, *, format=None, outputs=None, opt_level=1, overflow_trap=False,  # noqa: A001
            name=None):
    """Make a Program.

    source: a path (str or os.PathLike) to a .tfvm, .tfasm, .tfg, .onnx or .pb
    file; bytes (.tfvm bytecode, or an ONNX model unless format says
    otherwise); or .tfg source text (a str that contains a newline or a '{').
    entry: the .tfg function compiled as the entry point (default "main").
    format: "auto" (default), "tfvm", "tfasm", "tfg", "onnx" or "pb".
    outputs: for .pb, the results ("logits,split:1"; default: the outputs no
    node consumes). opt_level: 0 no optimization, 1 all. overflow_trap: .tfg
    integer overflow stops the run instead of wrapping. name: used in
    messages (default: the path, or "<string>"/"<bytes>").
    The GIL is released while tfvm compiles."""
    fmt = format or "auto"
    if isinstance(source, (bytes, bytearray, memoryview)):
        nm = name or "<bytes>"
        return Program(_tfvm.from_memory(source, nm, fmt, entry, outputs, opt_level, overflow_trap), nm)
    if isinstance(source, str) and ("\n" in source or "{" in source):
        nm = name or "<string>"
        if fmt == "auto":
            fmt = "tfg"
        return Program(_tfvm.from_memory(source.encode(), nm, fmt, entry, outputs, opt_level, overflow_trap), nm)
    path = _os.fspath(source)
    if isinstance(path, bytes):
        path = _os.fsdecode(path)
    return Program(_tfvm.open(path, fmt, entry, outputs, opt_level, overflow_trap), name or path)


# ---- ONNX Runtime's surface ---------------------------------------------------------


class GraphOptimizationLevel(_enum.IntEnum):
    """As ONNX Runtime's; tfvm has two levels: ORT_DISABLE_ALL turns tfvm's
    optimizations off, any other level turns them all on."""
    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_ALL = 99


class ExecutionMode(_enum.IntEnum):
    """Accepted for ONNX Runtime scripts; tfvm always runs independent work in parallel."""
    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


class SessionOptions:
    """ONNX Runtime's session options. tfvm uses intra_op_num_threads (its
    worker threads; 0 = one per core) and graph_optimization_level; the others
    are accepted and kept."""

    def __init__(self):
        self.intra_op_num_threads = 0
        self.inter_op_num_threads = 0
        self.graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_ALL
        self.execution_mode = ExecutionMode.ORT_SEQUENTIAL
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.logid = ""
        self.enable_profiling = False
        self.profile_file_prefix = "onnxruntime_profile_"
        self.optimized_model_filepath = ""
        self.enable_mem_pattern = True
        self.enable_mem_reuse = True
        self.enable_cpu_mem_arena = True
        self.use_deterministic_compute = False
        self._config = {}

    def add_session_config_entry(self, key, value):
        self._config[str(key)] = str(value)

    def get_session_config_entry(self, key):
        return self._config[key]

    def add_free_dimension_override_by_name(self, name, value):
        """Accepted; tfvm takes each run's shapes as they come."""

    def add_free_dimension_override_by_denotation(self, denotation, value):
        """Accepted; tfvm takes each run's shapes as they come."""

    def register_custom_ops_library(self, path):
        raise UnsupportedError("tfvm has no custom operator libraries (%s)" % path)


class RunOptions:
    """ONNX Runtime's run options, accepted and not used."""

    def __init__(self):
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.logid = ""
        self.terminate = False
        self.only_execute_path_to_fetches = False
        self._config = {}

    def add_run_config_entry(self, key, value):
        self._config[str(key)] = str(value)

    def get_run_config_entry(self, key):
        return self._config[key]


class NodeArg:
    """A model input or output: name, type ("tensor(float)") and shape (a list
    of ints, with the ONNX dimension's name (a str) or None where any size fits;
    None for a tensor of any rank)."""

    __slots__ = ("name", "type", "shape")

    def __init__(self, name, type, shape):  # noqa: A002
        self.name = name
        self.type = type
        self.shape = shape

    def __repr__(self):
        return "NodeArg(name=%r, type=%r, shape=%r)" % (self.name, self.type, self.shape)


class ModelMetadata:
    """ONNX Runtime's model metadata: read from an ONNX model's fields (empty
    for other formats)."""

    def __init__(self, producer_name="", graph_name="", domain="", description="", graph_description="",
                 version=0, custom_metadata_map=None):
        self.producer_name = producer_name
        self.graph_name = graph_name
        self.domain = domain
        self.description = description
        self.graph_description = graph_description
        self.version = version
        self.custom_metadata_map = custom_metadata_map or {}


def _pb_fields(buf):
    """The fields of a protocol buffer message: a list of (number, value),
    value an int (varint, fixed) or a memoryview (length-delimited: no copy,
    so that a model's weights are not copied to read its names)."""
    buf = memoryview(buf)
    out, i, n = [], 0, len(buf)
    while i < n:
        key, i = _pb_varint(buf, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            val, i = _pb_varint(buf, i)
        elif wire == 2:
            ln, i = _pb_varint(buf, i)
            val, i = buf[i:i + ln], i + ln
        elif wire == 1:
            val, i = int.from_bytes(buf[i:i + 8], "little"), i + 8
        elif wire == 5:
            val, i = int.from_bytes(buf[i:i + 4], "little"), i + 4
        else:
            raise ValueError("wire type %d" % wire)
        out.append((num, val))
    if i != n:
        raise ValueError("truncated")
    return out


def _pb_varint(buf, i):
    val = shift = 0
    while True:
        if i >= len(buf):
            raise ValueError("truncated")
        b = buf[i]
        i += 1
        val |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return val, i


def _pb_str(fields, num):
    return next((bytes(v).decode("utf-8", "replace") for k, v in fields if k == num and not isinstance(v, int)), "")


def _onnx_facts(data):
    """What tfvm's entry does not carry: the model's metadata, and the names of
    symbolic dimensions ({input or output name: [dim_param or None, ...]})."""
    model = _pb_fields(data)
    graph = _pb_fields(next((v for k, v in model if k == 7), b""))
    meta = ModelMetadata(
        producer_name=_pb_str(model, 2), domain=_pb_str(model, 4), description=_pb_str(model, 6),
        version=next((v for k, v in model if k == 5 and isinstance(v, int)), (1 << 63) - 1),  # as ORT: unset
        graph_name=_pb_str(graph, 2), graph_description=_pb_str(graph, 10),
        custom_metadata_map={_pb_str(p, 1): _pb_str(p, 2)
                             for p in (_pb_fields(v) for k, v in model if k == 14)})
    dims = {}
    for k, v in graph:
        if k not in (11, 12):  # ValueInfoProto of inputs, outputs
            continue
        vi = _pb_fields(v)
        tensor = _pb_fields(next((t for f, t in _pb_fields(next((x for f, x in vi if f == 2), b"")) if f == 1), b""))
        shape = _pb_fields(next((s for f, s in tensor if f == 2), b""))
        if any(f == 2 for f, _ in tensor):  # a shape is declared
            dims[_pb_str(vi, 1)] = [_onnx_dim(_pb_fields(d)) for f, d in shape if f == 1]
    return meta, dims


def _onnx_dim(d):
    """A TensorShapeProto.Dimension: its dim_value, dim_param, or None."""
    for k, v in d:
        if k == 1 and isinstance(v, int):
            return v - (1 << 64) if v >= 1 << 63 else v
        if k == 2 and not isinstance(v, int) and len(v):
            return bytes(v).decode("utf-8", "replace")
    return None


_PROVIDERS = {"CPUExecutionProvider": "cpu", "CUDAExecutionProvider": "cuda"}


def get_all_providers():
    """The execution providers tfvm knows."""
    return list(_PROVIDERS)


def get_available_providers():
    """The providers ready here: CUDA when a GPU is ready, and the CPU."""
    cuda_ok, _ = _tfvm.device_status("cuda")
    return (["CUDAExecutionProvider"] if cuda_ok else []) + ["CPUExecutionProvider"]


def get_device():
    """"GPU" when a GPU is ready, else "CPU"."""
    return "GPU" if _tfvm.device_status("cuda")[0] else "CPU"


def set_default_logger_severity(level):
    """Accepted; tfvm prints nothing."""


class InferenceSession:
    """ONNX Runtime's InferenceSession over a tfvm program.

    path_or_bytes: a .onnx, .pb, .tfvm, .tfasm or .tfg file, or the bytes of an
    ONNX model (or of .tfvm bytecode). providers: "CUDAExecutionProvider"
    (tfvm's CUDA device, when a GPU is ready) and/or "CPUExecutionProvider";
    others are ignored, like unavailable ones. Several threads may call run()
    at once."""

    def __init__(self, path_or_bytes, sess_options=None, providers=None, provider_options=None, **kwargs):
        self._options = sess_options or SessionOptions()
        level = 0 if self._options.graph_optimization_level == GraphOptimizationLevel.ORT_DISABLE_ALL else 1
        self._threads = int(self._options.intra_op_num_threads or 0)
        data = None
        if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            data = bytes(path_or_bytes)
            self._program = compile(data, opt_level=level)
        else:
            path = _os.fspath(path_or_bytes)
            self._program = compile(path, opt_level=level)
            if str(path).endswith(".onnx"):
                try:
                    with open(path, "rb") as f:
                        data = f.read()
                except OSError:
                    data = None
        self._meta, dims = ModelMetadata(), {}
        if data is not None and not data.startswith(b"TFVM"):
            try:
                self._meta, dims = _onnx_facts(data)
            except (ValueError, IndexError, _builtin_TypeError):  # not a model we can read: no names
                pass
        self._set_providers(providers)
        self._p = self._program._p
        sig = self._program.signature
        # as ONNX Runtime: an input with a default (an initializer of that
        # name) is an overridable initializer, not an input; both may be fed
        self._inputs = [self._node_arg(p, dims) for p in sig.params if not p.has_default]
        self._overridable = [self._node_arg(p, dims) for p in sig.params if p.has_default]
        self._outputs = [self._node_arg(r, dims) for r in sig.results]
        self._provider_options = provider_options

    @staticmethod
    def _node_arg(p, dims):
        # tfvm's declared shape, with the ONNX model's names for the sizes tfvm
        # leaves open; the model's whole shape where tfvm declares none
        onnx_dims = dims.get(p.name)
        if p.shape is None:
            shape = None if onnx_dims is None else list(onnx_dims)
        else:
            shape = [d if d is not None else (onnx_dims[i] if onnx_dims and i < len(onnx_dims) else None)
                     for i, d in enumerate(p.shape)]
        return NodeArg(p.name, _ORT_TYPE[_DT_NAME[p.dtype]], shape)

    def _set_providers(self, providers):
        names = [p[0] if isinstance(p, (tuple, list)) else p for p in (providers or ["CPUExecutionProvider"])]
        self._device = None
        self._providers = ["CPUExecutionProvider"]
        if "CUDAExecutionProvider" in names and _tfvm.device_status("cuda")[0]:
            self._device = "cuda"
            self._providers = ["CUDAExecutionProvider", "CPUExecutionProvider"]

    def run(self, output_names, input_feed, run_options=None):
        """The outputs named in output_names (None or []: all, in the model's
        order) for the inputs in input_feed ({name: array}): a list of arrays.
        The GIL is released while the model runs; Ctrl-C stops it."""
        return self._p.run_feed(output_names, input_feed, self._threads, self._device)

    def get_inputs(self):
        return list(self._inputs)

    def get_outputs(self):
        return list(self._outputs)

    def get_overridable_initializers(self):
        return list(self._overridable)

    def get_providers(self):
        return list(self._providers)

    def get_provider_options(self):
        return {p: {} for p in self._providers}

    def set_providers(self, providers=None, provider_options=None):
        self._set_providers(providers)

    def get_session_options(self):
        return self._options

    def get_modelmeta(self):
        return self._meta

    def get_profiling_start_time_ns(self):
        return 0

    def end_profiling(self):
        return ""

    def disable_fallback(self):
        pass

    def enable_fallback(self):
        pass

    @property
    def program(self):
        """The tfvm Program the session runs."""
        return self._program



# Terra for NumPy programs (docs/terra.md); imported last: it uses compile()
from ._terra import TerraFunction, terra  # noqa: E402
