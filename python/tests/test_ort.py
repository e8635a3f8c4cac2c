"""tfvm's ONNX Runtime surface: InferenceSession and friends on their own
(always), and a script written against onnxruntime's documented API run
unchanged with tfvm and with onnxruntime, giving the same results within 1e-5
(when onnxruntime is importable: it skips, saying so, otherwise)."""
import pathlib
import threading

import numpy as np
import pytest

import tfvm

MODELS = pathlib.Path(__file__).resolve().parent / "models"
W = np.load(MODELS / "weights.npz")


def softmax(a):
    e = np.exp(a - a.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def static_ref(x):
    return softmax(np.maximum(x @ W["W1"] + W["B1"], 0))


def dynamic_ref(x):
    y = np.tanh(x @ W["W2"] + W["B2"])
    return y, y.mean(axis=1)


def raises(cls, message, fn, *args, **kwargs):
    with pytest.raises(tfvm.Error) as info:
        fn(*args, **kwargs)
    assert type(info.value) is cls and str(info.value) == message, (type(info.value), str(info.value))


# ---- tfvm alone ----------------------------------------------------------------------


def test_metadata_of_inputs_and_outputs():
    s = tfvm.InferenceSession(str(MODELS / "dynamic.onnx"))
    assert [(a.name, a.type, a.shape) for a in s.get_inputs()] == [("x", "tensor(float)", ["batch", 8])]
    assert [(a.name, a.type, a.shape) for a in s.get_outputs()] == [
        ("y", "tensor(float)", ["batch", 6]), ("z", "tensor(float)", ["batch"])]
    assert repr(s.get_inputs()[0]) == "NodeArg(name='x', type='tensor(float)', shape=['batch', 8])"
    s = tfvm.InferenceSession(MODELS / "ints.onnx")
    assert [(a.name, a.type, a.shape) for a in s.get_inputs() + s.get_outputs()] == [
        ("x", "tensor(int64)", ["n"]), ("y", "tensor(int64)", ["n"]), ("c", "tensor(int64)", [4])]
    # a program that is not ONNX: tfvm's own declarations, None where any size fits
    s = tfvm.InferenceSession(pathlib.Path(__file__).resolve().parents[2] / "examples" / "mlp.tfg")
    assert s.get_inputs()[-1].shape == [None, 784] and s.get_outputs()[0].type == "tensor(float)"


def test_a_tfvm_program_as_a_session():
    # .tfvm bytes: no ONNX fields to read, tfvm's own names and shapes (the
    # importer declares the inputs' shapes and the results' the graph's
    # outputs declare; `batch`, a size of any value, is None)
    data = tfvm.compile(MODELS / "dynamic.onnx").save()
    s = tfvm.InferenceSession(data)
    assert [(a.name, a.shape) for a in s.get_inputs() + s.get_outputs()] == [
        ("x", [None, 8]), ("y", [None, 6]), ("z", [None])]
    m = s.get_modelmeta()
    assert (m.producer_name, m.graph_name, m.version, m.custom_metadata_map) == ("", "", 0, {})
    x = np.ones((2, 8), np.float32)
    np.testing.assert_allclose(s.run(["z"], {"x": x})[0], dynamic_ref(x)[1], rtol=1e-5, atol=1e-6)


def test_modelmeta():
    m = tfvm.InferenceSession(MODELS / "static.onnx").get_modelmeta()
    assert (m.producer_name, m.graph_name, m.domain, m.description, m.graph_description, m.version,
            m.custom_metadata_map) == ("tfvm-tests", "static", "tfvm.test", "a static-shape test model", "", 3,
                                       {"author": "issue 26"})
    assert tfvm.InferenceSession(MODELS / "ints.onnx").get_modelmeta().version == 2**63 - 1  # unset, as ORT says


def test_run_all_some_and_reordered_outputs():
    s = tfvm.InferenceSession((MODELS / "dynamic.onnx").read_bytes())
    for batch in (1, 5, 17):
        x = np.random.default_rng(batch).standard_normal((batch, 8)).astype(np.float32)
        y_ref, z_ref = dynamic_ref(x)
        y, z = s.run(None, {"x": x})
        assert y.shape == (batch, 6) and z.shape == (batch,)
        np.testing.assert_allclose(y, y_ref, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(z, z_ref, rtol=1e-5, atol=1e-6)
        (z2,) = s.run(["z"], {"x": x})
        z3, y3 = s.run(["z", "y"], {"x": x}, tfvm.RunOptions())
        assert np.array_equal(z2, z) and np.array_equal(z3, z) and np.array_equal(y3, y)
        assert s.run([], {"x": x})[1].shape == (batch,)
        assert len(s.run((), {"x": x})) == 2 and np.array_equal(s.run(("y",), {"x": x})[0], y)


def test_run_converts_lists_to_the_declared_dtype():
    s = tfvm.InferenceSession(MODELS / "ints.onnx")
    y, c = s.run(None, {"x": [5, 6, 7]})
    assert y.dtype == np.int64 and y.tolist() == [6, 7, 8]
    assert c.tolist() == [0, 1, 2, 3]
    # y is tfvm's own buffer; c, a constant the program keeps, comes as a copy:
    # writing it changes nothing for the next run
    assert type(y.base).__name__ == "PyCapsule" and c.base is None
    c[0] = 99
    y[0] = 99
    assert s.run(["c", "y"], {"x": [5, 6, 7]})[0].tolist() == [0, 1, 2, 3]


def test_run_errors():
    s = tfvm.InferenceSession(MODELS / "static.onnx")
    x = np.ones((3, 4), np.float32)
    raises(tfvm.ArgumentError, "input 'x' is missing from the feed", s.run, None, {})
    raises(tfvm.ArgumentError, "the model has no input named 'q'", s.run, None, {"x": x, "q": x})
    raises(tfvm.ArgumentError, "the model has no output named 'nope'", s.run, ["nope"], {"x": x})
    raises(tfvm.ArgumentError, "argument 1 'x' of entry 'main': expected f32[3, 4], got f32[2, 4]",
           s.run, None, {"x": np.ones((2, 4), np.float32)})
    raises(tfvm.ArgumentError, "argument 1 'x' of entry 'main': expected f32[3, 4], got f64[3, 4]",
           s.run, None, {"x": np.ones((3, 4))})


def test_options_providers_and_module_functions():
    so = tfvm.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.graph_optimization_level = tfvm.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.execution_mode = tfvm.ExecutionMode.ORT_SEQUENTIAL
    so.add_session_config_entry("session.load_model_format", "ONNX")
    assert so.get_session_config_entry("session.load_model_format") == "ONNX"
    with pytest.raises(tfvm.UnsupportedError):
        so.register_custom_ops_library("libcustom.so")
    s = tfvm.InferenceSession(MODELS / "static.onnx", so, providers=[("CPUExecutionProvider", {})])
    assert s.get_session_options() is so
    assert s.get_providers() == ["CPUExecutionProvider"]
    assert s.get_provider_options() == {"CPUExecutionProvider": {}}
    assert s.get_overridable_initializers() == []
    x = np.random.default_rng(3).standard_normal((3, 4)).astype(np.float32)
    np.testing.assert_allclose(s.run(None, {"x": x})[0], static_ref(x), rtol=1e-5, atol=1e-6)
    cuda = tfvm.devices()[1].available
    s = tfvm.InferenceSession(MODELS / "static.onnx", providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    assert s.get_providers() == (["CUDAExecutionProvider"] if cuda else []) + ["CPUExecutionProvider"]
    np.testing.assert_allclose(s.run(None, {"x": x})[0], static_ref(x), rtol=1e-5, atol=1e-6)
    assert tfvm.get_available_providers() == (["CUDAExecutionProvider"] if cuda else []) + ["CPUExecutionProvider"]
    assert tfvm.get_all_providers() == ["CPUExecutionProvider", "CUDAExecutionProvider"]
    assert tfvm.get_device() == ("GPU" if cuda else "CPU")
    tfvm.set_default_logger_severity(3)
    assert s.end_profiling() == "" and isinstance(s.program, tfvm.Program)


def test_threads_share_one_session():
    s = tfvm.InferenceSession(MODELS / "dynamic.onnx")
    errors = []

    def worker(k):
        rng = np.random.default_rng(k)
        try:
            for _ in range(50):
                x = rng.standard_normal((1 + k, 8)).astype(np.float32)
                y, z = s.run(None, {"x": x})
                y_ref, z_ref = dynamic_ref(x)
                assert np.allclose(y, y_ref, rtol=1e-5, atol=1e-6) and np.allclose(z, z_ref, rtol=1e-5, atol=1e-6)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert errors == []


# ---- the same script under onnxruntime and tfvm ----------------------------------------


def ort_script(onnxruntime, model, feeds):
    """Written against onnxruntime's documented API only."""
    so = onnxruntime.SessionOptions()
    so.intra_op_num_threads = 2
    so.inter_op_num_threads = 1
    so.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = onnxruntime.InferenceSession(str(model), sess_options=so, providers=["CPUExecutionProvider"])
    inputs = [(i.name, i.type, i.shape) for i in sess.get_inputs()]
    outputs = [(o.name, o.type, o.shape) for o in sess.get_outputs()]
    meta = sess.get_modelmeta()
    results = []
    for x in feeds:
        feed = {sess.get_inputs()[0].name: x}
        results.append(sess.run(None, feed))
        results.append(sess.run([o.name for o in reversed(sess.get_outputs())], feed))
    return inputs, outputs, (meta.producer_name, meta.graph_name, meta.domain, meta.description, meta.version,
                             meta.custom_metadata_map), sess.get_providers(), results


@pytest.mark.parametrize("model,shapes", [("static.onnx", [(3, 4)] * 3), ("dynamic.onnx", [(1, 8), (4, 8), (33, 8)]),
                                          ("ints.onnx", [(3,), (0,), (9,)])])
def test_an_ort_script_runs_unchanged(model, shapes):
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed in this venv: no parity check")
    rng = np.random.default_rng(26)
    feeds = [rng.standard_normal(s).astype(np.float32) if model != "ints.onnx" else np.arange(s[0], dtype=np.int64)
             for s in shapes]
    want = ort_script(ort, MODELS / model, feeds)
    got = ort_script(tfvm, MODELS / model, feeds)
    assert got[:4] == want[:4]
    for g, w in zip(got[4], want[4]):
        assert len(g) == len(w)
        for a, b in zip(g, w):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_the_rest_of_the_ort_surface():
    so = tfvm.SessionOptions()
    so.add_free_dimension_override_by_name("batch", 4)  # accepted: tfvm takes each run's shapes
    so.add_free_dimension_override_by_denotation("DATA_BATCH", 4)
    ro = tfvm.RunOptions()
    ro.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    assert ro.get_run_config_entry("memory.enable_memory_arena_shrinkage") == "cpu:0"
    s = tfvm.InferenceSession(MODELS / "dynamic.onnx", so)
    assert s.get_profiling_start_time_ns() == 0
    s.disable_fallback()
    s.enable_fallback()
    s.set_providers(["CPUExecutionProvider"])
    assert s.get_providers() == ["CPUExecutionProvider"]
    x = np.ones((6, 8), np.float32)
    y, z = s.run(None, {"x": x}, ro)
    assert y.shape == (6, 6) and z.shape == (6,)
    try:
        s.run(["w"], {"x": x})
    except tfvm.Error as e:
        assert e.message == str(e) == "the model has no output named 'w'"
        assert (e.code, e.instr, e.tag, e.where) == ("TFVM_ERR_ARGUMENT", "", "", "")
    else:
        pytest.fail("no error for an unknown output")


def test_overridable_initializer():
    # test/onnx/models/mlp.onnx (IR 8) lists its weight W1 as an input too:
    # as in ONNX Runtime, W1 is an overridable initializer, not an input; fed,
    # its value is used, left out, the initializer's
    s = tfvm.InferenceSession(pathlib.Path(__file__).resolve().parents[2] / "test" / "onnx" / "models" / "mlp.onnx")
    assert [i.name for i in s.get_inputs()] == ["x"]
    assert [(i.name, i.shape) for i in s.get_overridable_initializers()] == [("W1", [4, 3])]
    x = np.array([[1, 2, 3, 4], [-1, 0, 1, 2]], np.float32)
    np.testing.assert_array_equal(s.run(None, {"x": x})[0], [[44.5, 50.5], [36.5, 34.5]])
    np.testing.assert_array_equal(s.run(None, {"x": x, "W1": np.ones((4, 3), np.float32)})[0],
                                  [[24.5, 20.5], [8.5, 4.5]])
    with pytest.raises(tfvm.ArgumentError, match="the model has no input named 'w1'"):
        s.run(None, {"x": x, "w1": np.ones((4, 3), np.float32)})
    p = tfvm.compile(str(pathlib.Path(__file__).resolve().parents[2] / "test" / "onnx" / "models" / "mlp.onnx"))
    assert [(q.name, q.has_default) for q in p.signature.params] == [("x", False), ("W1", True)]
    np.testing.assert_array_equal(p.run(x), [[44.5, 50.5], [36.5, 34.5]])
