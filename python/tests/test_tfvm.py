"""The tfvm package's own surface: compile, Program, Session, devices, the
error classes with tfvm's exact messages, NumPy in and out without copies,
threads, Ctrl-C. Run by `make pytest` (python/tests/run.sh)."""
import gc
import os
import pathlib
import signal
import sys
import threading
import time

import numpy as np
import pytest

import tfvm

REPO = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
MODELS = pathlib.Path(__file__).resolve().parent / "models"

DIV = "fn main(a: i32, b: i32) -> i32 {\n    a / b\n}\n"
MATMUL = "fn main(a: f32[?, ?], b: f32[?, ?]) -> f32[?, ?] {\n    matmul(a, b)\n}\n"


def raises(cls, message, fn, *args, **kwargs):
    """fn(*args, **kwargs) raises exactly cls (not a subclass) with str() == message."""
    with pytest.raises(tfvm.Error) as info:
        fn(*args, **kwargs)
    assert type(info.value) is cls, (type(info.value), str(info.value))
    assert str(info.value) == message
    return info.value


# ---- module ------------------------------------------------------------------------


def test_version_is_the_librarys():
    header = (REPO / "include" / "tfvm.h").read_text()
    assert '#define TFVM_VERSION_STRING "%s"' % tfvm.__version__ in header


def test_devices_lists_cpu_ready_and_cuda():
    devs = tfvm.devices()
    assert [d.name for d in devs] == ["cpu", "cuda"]
    cpu = devs[0]
    assert cpu.available is True and cpu.status.startswith("ready (")
    cuda = devs[1]
    assert cuda.available == cuda.status.startswith("ready")


def test_error_classes_mirror_tfvm_status():
    # one class per tfvm_status code, in the header's order, each a tfvm.Error
    names = ["NomemError", "IoError", "FormatError", "SyntaxError", "ArgumentError", "TypeError", "ShapeError",
             "ArithError", "PortError", "DeadnessError", "StuckError", "LimitError", "InterruptedError",
             "InternalError", "UnsupportedError", "DeviceError"]
    codes = ["NOMEM", "IO", "FORMAT", "SYNTAX", "ARGUMENT", "TYPE", "SHAPE", "ARITH", "PORT", "DEADNESS", "STUCK",
             "LIMIT", "INTERRUPTED", "INTERNAL", "UNSUPPORTED", "DEVICE"]
    assert [c.__name__ for c in tfvm._ERRORS[1:]] == names
    assert list(tfvm._tfvm.status_names()) == ["TFVM_OK"] + ["TFVM_ERR_" + c for c in codes]
    for cls in tfvm._ERRORS[1:]:
        assert issubclass(cls, tfvm.Error)
    # and the builtin each one also is, so that generic handlers catch them
    assert issubclass(tfvm.NomemError, MemoryError)
    assert issubclass(tfvm.IoError, OSError)
    assert issubclass(tfvm.ArgumentError, ValueError)
    assert issubclass(tfvm.TypeError, TypeError)
    assert issubclass(tfvm.ArithError, ArithmeticError)


# ---- compile ------------------------------------------------------------------------


def test_compile_tfg_file_and_run_scalars():
    p = tfvm.compile(EXAMPLES / "fib.tfg")
    assert p.run(20) == 10946
    assert p.run(n=10) == 89
    assert isinstance(p.run(1), int)
    assert p.name == str(EXAMPLES / "fib.tfg")


def test_compile_source_text_entry_and_options():
    src = "fn twice(x: i64) -> i64 { x * 2 }\nfn main(x: i64) -> i64 { x + 1 }\n"
    assert tfvm.compile(src).run(5) == 6
    p = tfvm.compile(src, entry="twice")
    assert list(p.entries) == ["twice"]
    assert p.run(5) == 10
    assert tfvm.compile(src, opt_level=0).run(41) == 42


def test_compile_overflow_trap():
    src = "fn main(x: i32) -> i32 {\n    x + 1\n}\n"
    assert tfvm.compile(src).run(2**31 - 1) == -2**31
    e = raises(tfvm.ArithError, "add_ov_2_7 (ADD_OV) at []: i32 overflow",
               tfvm.compile(src, overflow_trap=True, name="ov.tfg").run, 2**31 - 1)
    assert (e.code, e.instr, e.where) == ("TFVM_ERR_ARITH", "add_ov_2_7", "ov.tfg:2:7")


def test_compile_tfasm_text_and_file():
    text = (EXAMPLES / "asm" / "fib.tfasm").read_text()
    assert tfvm.compile(text, format="tfasm").run(10) == 89
    assert tfvm.compile(str(EXAMPLES / "asm" / "fib.tfasm")).run(20) == 10946


def test_compile_onnx_path_and_bytes():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    a = tfvm.compile(MODELS / "static.onnx").run(x)
    b = tfvm.compile((MODELS / "static.onnx").read_bytes()).run(x)
    assert a.shape == (3, 5) and np.array_equal(a, b)


def test_compile_tensorflow_pb():
    fixtures = REPO / "test" / "tf" / "fixtures"
    p = tfvm.compile(fixtures / "ackermann.pb")
    args = [np.load(fixtures / ("ackermann.in%d.npy" % i)) for i in range(2)]
    assert np.array_equal(p.run(*args), np.load(fixtures / "ackermann.out0.npy"))


def test_save_and_load_round_trip(tmp_path):
    p = tfvm.compile(EXAMPLES / "fib.tfg")
    data = p.save()
    assert data.startswith(b"TFVM\r\n\x1a\n")
    assert tfvm.compile(data).run(15) == 987
    out = tmp_path / "fib.tfvm"
    assert p.save(out) is None
    assert out.read_bytes() == data
    assert tfvm.compile(out).run(15) == 987


def test_compile_errors_carry_tfvms_messages(tmp_path):
    e = raises(tfvm.SyntaxError, "s.tfg:1:10: expected a parameter name, got '->'\n"
               " 1 | fn main( -> i32 { 1 }\n"
               "   |          ^", tfvm.compile, "fn main( -> i32 { 1 }\n", name="s.tfg")
    assert e.code == "TFVM_ERR_SYNTAX"
    raises(tfvm.TypeError, "u.tfg:1:20: 'x' is not defined\n"
           " 1 | fn main() -> i32 { x }\n"
           "   |                    ^", tfvm.compile, "fn main() -> i32 { x }\n", name="u.tfg")
    missing = tmp_path / "missing.onnx"
    e = raises(tfvm.IoError, "%s: No such file or directory" % missing, tfvm.compile, missing)
    assert isinstance(e, OSError)
    raises(tfvm.FormatError, "g.onnx: bad .onnx file (not a valid ModelProto: truncated or corrupt protobuf)",
           tfvm.compile, b"garbage bytes", name="g.onnx")
    raises(tfvm.FormatError, "<bytes>: bad .tfvm file (truncated header at byte 8)", tfvm.compile,
           b"TFVM\r\n\x1a\n")
    notes = tmp_path / "notes.txt"
    notes.write_text("hello")
    raises(tfvm.FormatError, "%s: unknown format (not .tfvm bytecode, and the name does not end in .tfvm, "
           ".tfasm, .tfg, .onnx or .pb)" % notes, tfvm.compile, notes)
    raises(tfvm.ArgumentError, "unknown format 'xyz' (auto, tfvm, tfasm, tfg, onnx or pb)",
           tfvm.compile, notes, format="xyz")


# ---- Program ------------------------------------------------------------------------


def test_entries_and_signature():
    p = tfvm.compile(EXAMPLES / "mlp.tfg")
    assert list(p.entries) == ["main"]
    sig = p.signature
    assert sig is p.entries["main"]
    assert [(a.name, a.dtype, a.shape, a.is_tensor) for a in sig.params][-1] == \
        ("x", np.dtype(np.float32), (None, 784), True)
    assert sig.params[0] == tfvm.Param("w1", np.dtype(np.float32), (784, 512), True)
    assert sig.results == [tfvm.Param("logits", np.dtype(np.float32), (None, 10), True)]
    fib = tfvm.compile(EXAMPLES / "fib.tfg").signature
    assert fib.params == [tfvm.Param("n", np.dtype(np.int32), (), False)]


def test_dis_prints_every_instruction():
    text = tfvm.compile(EXAMPLES / "fib.tfg").dis()
    lines = text.splitlines()
    assert lines[0] == 'n = ARG 0 @15:9 var "n"'  # the source variable it carries
    assert "RESULT 0 (fib_2) @15:4" in lines
    assert text.endswith("\n") and all(lines)


def test_run_argument_errors():
    p = tfvm.compile(DIV, name="div.tfg")
    assert p.run(7, 2) == 3
    assert p.run(b=2, a=7) == 3
    raises(tfvm.ArgumentError, "missing argument 2 'b' of entry 'main'", p.run, 7)
    raises(tfvm.ArgumentError, "entry 'main' takes 2 arguments, got 3", p.run, 7, 2, 3)
    raises(tfvm.ArgumentError, "argument 'a' of entry 'main' given twice", p.run, 7, a=2)
    raises(tfvm.ArgumentError, "entry 'main' has no parameter 'c'", p.run, 7, c=2)
    raises(tfvm.ArgumentError, "4294967296 does not fit i32", p.run, 7, 2**32)
    raises(tfvm.ArgumentError, "no entry named 'nope'", p.run, 7, 2, entry="nope")
    raises(tfvm.ArgumentError, "unknown device 'tpu' (cpu, cuda or auto)", p.run, 7, 2, device="tpu")


def test_run_time_error_has_instruction_tag_and_position():
    e = raises(tfvm.ArithError, "div_2_7 (DIV) at []: integer division by zero",
               tfvm.compile(DIV, name="div.tfg").run, 7, 0)
    assert (e.code, e.instr, e.tag, e.where) == ("TFVM_ERR_ARITH", "div_2_7", "[]", "div.tfg:2:7")
    raises(tfvm.ShapeError, "matmul_2_5 (MATMUL) at []: matmul: inner dims differ: [2, 3] and [2, 3]",
           tfvm.compile(MATMUL, name="mm.tfg").run, np.ones((2, 3), np.float32), np.ones((2, 3), np.float32))


def test_cuda_device_when_there_is_none():
    if tfvm.devices()[1].available:
        assert tfvm.compile(DIV).run(7, 2, device="cuda") == 3
    else:
        raises(tfvm.DeviceError, "cuda: " + tfvm.devices()[1].status, tfvm.compile(DIV).run, 7, 2, device="cuda")


def test_cuda_device_on_the_host_stand_in():
    # test/unit/fake_cuda.c, loaded as the CUDA backend (TFVM_CUDA_LIB) in a
    # fresh process: tfvm asks for "cuda" once per process
    import subprocess
    fake = os.environ.get("TFVM_TEST_FAKE_CUDA")
    if not fake or not os.path.exists(fake):
        pytest.skip("no fake CUDA backend (make pytest sets TFVM_TEST_FAKE_CUDA when make has built it)")
    code = ("import tfvm, numpy as np\n"
            "print(tfvm.devices()[1].available, tfvm.get_available_providers(), tfvm.get_device())\n"
            "p = tfvm.compile(%r)\n"
            "a = np.arange(6, dtype=np.float32).reshape(2, 3)\n"
            "print(p.run(a, a.T, device='cuda').tolist(), p.run(a, a.T, device='auto').tolist())\n"
            "s = tfvm.InferenceSession(%r, providers=['CUDAExecutionProvider'])\n"
            "print(s.get_providers(), s.run(None, {'x': np.ones((3, 4), np.float32)})[0].shape)\n"
            % (MATMUL, str(MODELS / "static.onnx")))
    env = dict(os.environ, TFVM_CUDA_LIB=fake)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "True ['CUDAExecutionProvider', 'CPUExecutionProvider'] GPU",
        "[[5.0, 14.0], [14.0, 50.0]] [[5.0, 14.0], [14.0, 50.0]]",
        "['CUDAExecutionProvider', 'CPUExecutionProvider'] (3, 5)"]


def test_run_several_results_and_threads_option():
    src = "fn main(a: i64, b: i64) -> (q: i64, r: i64) { (a / b, a % b) }\n"
    p = tfvm.compile(src)
    assert p.run(17, 5) == (3, 2)
    assert p.run(17, 5, threads=1) == (3, 2)
    assert p.run(17, 5, threads=2, device="cpu") == (3, 2)
    assert tfvm.compile(EXAMPLES / "fib.tfg").run(22, threads=2) == 28657


# ---- NumPy in and out ------------------------------------------------------------------

DTYPES = [(np.bool_, "bool"), (np.int8, "i8"), (np.uint8, "u8"), (np.int32, "i32"), (np.int64, "i64"),
          (np.float32, "f32"), (np.float64, "f64")]


@pytest.mark.parametrize("dtype,name", DTYPES, ids=[n for _, n in DTYPES])
def test_every_dtype_in_and_out(dtype, name):
    p = tfvm.compile("fn main(x: %s[?, ?]) -> %s[?, ?] { x }\n" % (name, name))
    x = (np.arange(6).reshape(2, 3) % 2).astype(dtype)
    y = p.run(x)
    assert y.dtype == np.dtype(dtype) and y.shape == (2, 3) and np.array_equal(x, y)
    # a result over the input's own buffer comes back as a copy: it must not
    # change when the caller later changes the input
    assert not np.shares_memory(x, y)
    x[0, 0] = not x[0, 0] if name == "bool" else x[0, 0] + 1
    assert not np.array_equal(x, y)


def test_scalar_results_are_python_numbers():
    for name, val, typ in [("bool", True, bool), ("i8", -3, int), ("u8", 200, int), ("i32", -7, int),
                           ("i64", 2**40, int), ("f32", 1.5, float), ("f64", 0.1, float)]:
        r = tfvm.compile("fn main(x: %s) -> %s { x }\n" % (name, name)).run(val)
        assert type(r) is typ and r == val, name


def test_unsupported_and_odd_inputs():
    p = tfvm.compile(MATMUL)
    raises(tfvm.ArgumentError, "an array of dtype complex64: tfvm has bool, int8, uint8, int16, uint16, int32, uint32, "
           "int64, uint64, float16, float32 and float64", p.run, np.ones((2, 3), np.complex64),
           np.ones((3, 1), np.float32))
    raises(tfvm.ArgumentError, "argument 1 'a' of entry 'main': expected f32[?, ?], got f64[2, 3]",
           p.run, np.ones((2, 3)), np.ones((3, 1), np.float32))
    raises(tfvm.ArgumentError, "an array of rank 9: tfvm tensors have at most 8 dimensions",
           p.run, np.ones((1,) * 9, np.float32), np.ones((3, 1), np.float32))
    ones = np.ones((3, 1), np.float32)
    # not C-contiguous, big-endian, a list: converted once, same answers
    assert np.array_equal(p.run(np.ones((2, 6), np.float32)[:, ::2], ones), np.full((2, 1), 3, np.float32))
    assert np.array_equal(p.run(np.ones((2, 3), ">f4"), ones), np.full((2, 1), 3, np.float32))
    assert np.array_equal(p.run([[1, 2, 3]], ones), np.array([[6]], np.float32))
    # empty tensors
    assert p.run(np.ones((0, 3), np.float32), ones).shape == (0, 1)


def test_inputs_are_not_copied():
    # a wrapped input holds a reference to the caller's array itself (and drops
    # it when tfvm releases the tensor); an input that has to be converted
    # does not (its copy is held instead)
    p = tfvm.compile(EXAMPLES / "coexec" / "train.tfg")
    x = np.ones((4, 8), np.float32)
    strided = np.ones((4, 16), np.float32)
    base_x, base_s = sys.getrefcount(x), sys.getrefcount(strided)
    s = p.session(np.float32(0.1))
    s.feed("x", x)
    s.feed("x", strided[:, ::2])
    assert sys.getrefcount(x) == base_x + 1
    assert sys.getrefcount(strided) == base_s
    s.cancel()
    gc.collect()
    assert sys.getrefcount(x) == base_x
    # and a run leaves no reference behind
    mm = tfvm.compile(MATMUL)
    a = np.ones((2, 3), np.float32)
    base_a = sys.getrefcount(a)
    for _ in range(10):
        mm.run(a, np.ones((3, 2), np.float32))
    assert sys.getrefcount(a) == base_a


def test_results_own_tfvms_buffer_and_outlive_the_program():
    p = tfvm.compile(MATMUL)
    y = p.run(np.ones((2, 3), np.float32), np.ones((3, 4), np.float32))
    # no copy: the array is a view of tfvm's tensor, kept by a capsule; writable,
    # as ONNX Runtime's results are (nobody else sees the tensor)
    assert y.base is not None and type(y.base).__name__ == "PyCapsule"
    assert y.flags.writeable and y.flags.c_contiguous and y.flags.owndata is False
    sess = tfvm.InferenceSession(MODELS / "static.onnx")
    r = sess.run(None, {"x": np.ones((3, 4), np.float32)})[0]
    del p, sess
    gc.collect()
    assert np.array_equal(y, np.full((2, 4), 3, np.float32))
    assert r.shape == (3, 5) and abs(float(r.sum()) - 3.0) < 1e-5
    y[0, 0] = 1
    assert y.sum() == 22


# ---- sessions: feed and fetch ------------------------------------------------------------


def train_reference(lr, batches):
    w = np.zeros((8, 1), np.float32)
    losses = []
    for x, y in batches:
        err = x @ w - y
        losses.append(float(np.mean(err * err)))
        w = w - (np.float32(2.0) * np.float32(lr) / np.float32(x.shape[0])) * (x.T @ err)
    return losses, w


def make_batches(n):
    rng = np.random.default_rng(7)
    wt = rng.standard_normal((8, 1)).astype(np.float32)
    out = []
    for _ in range(n):
        x = rng.standard_normal((4, 8)).astype(np.float32)
        out.append((x, x @ wt))
    return out


def test_session_feed_fetch_finish():
    p = tfvm.compile(EXAMPLES / "coexec" / "train.tfg")
    batches = make_batches(5)
    losses_ref, w_ref = train_reference(0.1, batches)
    with p.session(np.float32(0.1)) as s:
        assert s.active
        losses = []
        for x, y in batches:
            s.feed("stop", False)
            s.feed("x", x)
            s.feed("y", y)
            losses.append(s.fetch("loss"))
        s.feed("stop", True)
        w = s.finish()
        assert not s.active
    assert np.allclose(losses, losses_ref, rtol=1e-5, atol=1e-6)
    assert w.shape == (8, 1) and np.allclose(w, w_ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("wait", [None, True])
def test_session_with_a_feeder_thread(wait):
    # wait=None: the fetches wait for the feeder once it has fed (so the test lets
    # it feed first); wait=True: they wait for it from the start
    p = tfvm.compile(EXAMPLES / "coexec" / "train.tfg")
    batches = make_batches(20)
    losses_ref, w_ref = train_reference(0.05, batches)
    s = p.session(lr=np.float32(0.05))
    started = threading.Event()

    def feeder():
        for i, (x, y) in enumerate(batches):
            s.feed("stop", np.bool_(False))
            s.feed("x", x)
            s.feed("y", y)
            started.set()
            time.sleep(0.002 * (i % 3))
        s.feed("stop", True)

    t = threading.Thread(target=feeder)
    t.start()
    if wait is None:
        started.wait()
    losses = [s.fetch("loss", wait=wait) for _ in batches]  # blocks without the GIL while the feeder runs
    t.join()
    w = s.finish()
    assert np.allclose(losses, losses_ref, rtol=1e-5, atol=1e-6)
    assert np.allclose(w, w_ref, rtol=1e-5, atol=1e-6)


def test_session_errors():
    p = tfvm.compile(EXAMPLES / "coexec" / "train.tfg")
    s = p.session(0.1)
    raises(tfvm.StuckError, "FETCH 'loss' (fetch_11_9) waits for value #1, but the graph waits for the host: "
           "FEED 'stop' (feed_7_12) at [main_while1#0] waits for value #1", s.fetch, "loss")
    raises(tfvm.ArgumentError, "the program has no FETCH channel 'nope' (it has 'loss')", s.fetch, "nope")
    raises(tfvm.ArgumentError, "the program has no FEED channel 'nope' (it has 'stop', 'x', 'y')", s.feed, "nope", 1)
    raises(tfvm.TypeError, "channel 'x' takes f32[?, 8], got f64[2, 8]", s.feed, "x", np.ones((2, 8)))
    raises(tfvm.TypeError, "channel 'x' takes f32[?, 8], got f32[2, 4]", s.feed, "x", np.ones((2, 4), np.float32))
    raises(tfvm.TypeError, "channel 'stop' takes bool, got i32", s.feed, "stop", 1)
    e = raises(tfvm.StuckError, "feed_7_12 (FEED) at [main_while1#0]: channel 'stop' waits for value #1, but the "
               "host feeds no more values", s.finish)
    assert e.instr == "feed_7_12" and e.where.endswith("train.tfg:7:12")
    assert not s.active
    raises(tfvm.ArgumentError, "the session has ended", s.feed, "stop", True)
    raises(tfvm.ArgumentError, "the session has ended", s.fetch, "loss")
    raises(tfvm.ArgumentError, "the session has ended", s.finish)
    s.cancel()  # after the end: no-op
    # arguments are checked as for a run, before the session starts
    small = tfvm.compile("fn main(x: f32[2]) -> f32 { reduce_sum(x) }\n")
    raises(tfvm.ArgumentError, "argument 1 'x' of entry 'main': expected f32[2], got f32[3]",
           small.session, np.ones(3, np.float32))
    assert small.session(np.ones(2, np.float32)).finish() == 2.0
    # leaving the with block cancels a session that did not finish; the VM is reused
    with p.session(0.1) as s2:
        s2.feed("stop", False)
    assert not s2.active
    with p.session(0.1) as s3:
        s3.feed("stop", True)
        assert s3.finish().shape == (8, 1)


def test_threads_run_sessions_at_once():
    p = tfvm.compile(EXAMPLES / "coexec" / "train.tfg")
    batches = make_batches(10)
    losses_ref, w_ref = train_reference(0.1, batches)
    errors = []

    def trainer():
        try:
            with p.session(np.float32(0.1), threads=1) as s:
                losses = []
                for x, y in batches:
                    s.feed("stop", False)
                    s.feed("x", x)
                    s.feed("y", y)
                    losses.append(s.fetch("loss"))
                s.feed("stop", True)
                w = s.finish()
            assert np.allclose(losses, losses_ref, rtol=1e-5, atol=1e-6) and np.allclose(w, w_ref, rtol=1e-5, atol=1e-6)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=trainer) for _ in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert errors == []


def test_cancel_wakes_a_fetch_on_another_thread():
    p = tfvm.compile(EXAMPLES / "coexec" / "train.tfg")
    s = p.session(0.1)
    s.feed("stop", False)  # the graph now waits for x: a fetch of loss would wait, not be stuck,
    got = []               # while another host thread may still feed

    def fetcher():
        try:
            got.append(s.fetch("loss"))
        except tfvm.Error as e:
            got.append(e)

    t = threading.Thread(target=fetcher)
    t.start()
    time.sleep(0.2)
    s.cancel()
    t.join(10)
    assert not t.is_alive()
    assert len(got) == 1 and isinstance(got[0], tfvm.Error)


# ---- threads, the GIL, Ctrl-C ---------------------------------------------------------------


def test_threads_run_one_program_at_once():
    p = tfvm.compile(EXAMPLES / "fib.tfg")
    want = {n: p.run(n) for n in range(10, 18)}
    errors, results = [], []

    def worker(k):
        try:
            for i in range(20):
                n = 10 + (k + i) % 8
                results.append(p.run(n, threads=1) == want[n])
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert errors == [] and len(results) == 80 and all(results)


def test_gil_is_released_during_a_run():
    p = tfvm.compile(EXAMPLES / "fib.tfg")
    state = {"in": False, "out": False}

    def long_run():
        state["in"] = True
        p.run(33, threads=1)  # 0.3 s here; a fast machine takes half that
        state["out"] = True

    t = threading.Thread(target=long_run)
    t.start()
    while not state["in"]:
        time.sleep(0.001)
    first = last = None
    while t.is_alive():
        if not state["out"]:
            now = time.monotonic()
            first = first or now
            last = now
    t.join()
    # the main thread ran Python for a good while during the other's run: with
    # the GIL held it could have run at most one switch interval (5 ms) before
    # the run began
    assert first is not None and last - first > 0.05


@pytest.fixture
def sigint_raises():
    """Ctrl-C as an interactive Python has it: a process started in the
    background of a non-interactive shell (a `make asan &`) inherits SIGINT
    ignored, and Python then leaves it so, which no run could notice"""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals need the main thread")
def test_ctrl_c_interrupts_a_run(sigint_raises):
    p = tfvm.compile(EXAMPLES / "fib.tfg")
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    start = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        p.run(45, threads=1)  # minutes, were it not stopped
    elapsed = time.monotonic() - start
    timer.join()
    assert elapsed < 10
    # the VM runs again afterwards
    assert p.run(10) == 89


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals need the main thread")
def test_ctrl_c_interrupts_a_fetch(sigint_raises):
    src = ("fn main(n: i32) -> i32 {\n    fetch(\"r\", fib(n));\n    0\n}\n"
           "fn fib(n: i32) -> i32 { if n <= 1 { 1 } else { fib(n - 1) + fib(n - 2) } }\n")
    p = tfvm.compile(src)
    s = p.session(45, threads=1)
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    start = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        s.fetch("r")
    timer.join()
    assert time.monotonic() - start < 10
    s.cancel()


# ---- the stubs and __all__ -------------------------------------------------------------------


def test_stubs_declare_every_public_name():
    import re
    stub = (pathlib.Path(tfvm.__file__).parent / "__init__.pyi").read_text()
    declared = set(re.findall(r"^(?:class|def) (\w+)", stub, re.M)) | set(re.findall(r"^(\w+):", stub, re.M))
    public = {n for n, v in vars(tfvm).items()
              if not n.startswith("_") and not isinstance(v, type(sys)) and n not in ("Any",)} | {"__version__"}
    assert public - declared == set()
    assert {n for n in declared if not n.startswith("_")} - public == set()
    # __all__: every public name but the three that share a builtin's name
    assert set(tfvm.__all__) == public - {"SyntaxError", "TypeError", "InterruptedError"}
