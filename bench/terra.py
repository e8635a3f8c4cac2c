"""bench/terra.py — `make bench`: Terra (tfvm.terra, docs/terra.md) against
plain NumPy on the six programs of examples/terra/, in one run.

    python bench/terra.py [--steps N] [--jax-python PY]

Per program: the mean time per step of plain NumPy and of Terra over the
same steps (after WARMUP steps each, which include Terra's tracing and first
compile), their ratio (target: >= 1.3x on four of the six), Terra's
fallbacks, and the overlap of Figure 6 of the Terra paper: per co-executed
step, how long Python waited for the graph (blocked in fetch) and how long
the graph waited for Python (the step's time less the graph's own time, the
latter measured by running the same graph on a recording of the step's
feeds, all queued before it starts). Then which programs jax.jit compiles
unchanged (np swapped for jax.numpy, the rest of the program as written), run
by PY (the bench venv, where jax is installed from PyPI if pip can).
"""
import argparse
import importlib
import json
import os
import subprocess
import sys
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples", "terra"))

# program -> the sizes of the bench (the tests use the programs' small defaults)
SIZES = {
    "dropblock": {"n": 256, "d": 512, "h": 1024},
    "sdpoint": {"n": 512, "d": 512, "depth": 4},
    "charrnn": {"vocab": 64, "hidden": 512, "length": 12},
    "layerlist": {"n": 256, "d": 512},
    "detection": {"n": 2048, "d": 256},
    "mlp": {"n": 512, "d": 256, "hidden": 1024},
}
PROGRAMS = list(SIZES)
WARMUP = 10


def timed(m, step_fn, steps):
    """Seconds per step after WARMUP steps, and the run's results."""
    marks = []

    def step(*args, **kwargs):
        out = step_fn(*args, **kwargs)
        marks.append(time.perf_counter())
        return out
    t0 = time.perf_counter()
    m.run(step, steps=steps, **SIZES[m.__name__])
    marks.insert(0, t0)
    return (marks[-1] - marks[WARMUP]) / (len(marks) - 1 - WARMUP)


def graph_alone(f, record, rounds=20):
    """Seconds per step of f's graph on a recorded step: every feed queued
    before the graph starts, then the fetches in the step's order."""
    s = f.program.session()
    t0 = time.perf_counter()
    for _ in range(rounds):
        for ch, v in record:
            if ch is not None:
                s.feed(ch, v)
        s.feed("go", True)
        for ch, name in record:
            if ch is None:
                s.fetch(name)
    dt = (time.perf_counter() - t0) / rounds
    s.feed("go", False)
    s.finish()
    return dt


def bench_program(name, steps):
    import tfvm
    m = importlib.import_module(name)
    t_np = timed(m, m.step, steps)
    f = tfvm.terra(m.step)
    wait0 = [0.0, 0]

    def counting(*args, **kwargs):
        if f.stats["coexec_steps"] == WARMUP:
            wait0[:] = [f.stats["python_wait_s"], f.stats["coexec_steps"]]
            f.recording = []
        elif f.recording:
            record[:] = f.recording
            f.recording = []
        return f(*args, **kwargs)
    record = []
    t_terra = timed(m, counting, steps)
    coexec = f.stats["coexec_steps"] - wait0[1]
    py_wait = (f.stats["python_wait_s"] - wait0[0]) / max(coexec, 1)
    f.close()
    g = graph_alone(f, record) if record and f.program else float("nan")
    return t_np, t_terra, py_wait, g, f


def jax_check(name):
    """Runs `name` under jax.jit with np swapped for jax.numpy in the
    program's functions; 'ok', or why not."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    m = importlib.import_module(name)
    ns = dict(vars(m), np=jnp)
    patched = []
    for key, obj in vars(m).items():
        if isinstance(obj, types.FunctionType) and obj.__module__ == name:
            ns[key] = types.FunctionType(obj.__code__, ns, key, obj.__defaults__)
        elif isinstance(obj, type) and obj.__module__ == name:
            for attr, fn in list(vars(obj).items()):
                if isinstance(fn, types.FunctionType):
                    patched.append((obj, attr, fn))
                    setattr(obj, attr, types.FunctionType(fn.__code__, ns, attr, fn.__defaults__))
    try:
        got = m.run(jax.jit(ns["step"]), steps=5)
        for obj, attr, fn in patched:
            setattr(obj, attr, fn)
        want = m.run(m.step, steps=5)
        np.testing.assert_allclose(np.asarray(got[-1], dtype=float), np.asarray(want[-1], dtype=float), rtol=1e-4)
        return "ok"
    except Exception as e:  # noqa: BLE001 - the reason is the result
        msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
        return "fails: %s: %s" % (type(e).__name__, msg[:90])
    finally:
        for obj, attr, fn in patched:
            setattr(obj, attr, fn)


def jax_rows(py):
    print("jax.jit on the same programs (np -> jax.numpy, nothing else changed), as the AutoGraph-like peer:")
    if not py or not os.path.exists(py):
        print("  skipped: no bench venv python (%s)" % py)
        return
    have = subprocess.run([py, "-c", "import jax"], capture_output=True).returncode == 0
    if not have:
        r = subprocess.run([py, "-m", "pip", "install", "-q", "jax"], capture_output=True, text=True)
        if r.returncode != 0:
            why = (r.stderr.strip().splitlines() or ["?"])[-1]
            print("  skipped: pip could not install jax into %s (%s)" % (py, why))
            return
    r = subprocess.run([py, os.path.abspath(__file__), "--jax-only"], capture_output=True, text=True)
    sys.stdout.write(r.stdout if r.returncode == 0 else "  jax check failed: %s\n" % r.stderr.strip()[-300:])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--jax-python", default=None)
    ap.add_argument("--jax-only", action="store_true")
    ap.add_argument("--numpy-only", action="store_true")
    ap.add_argument("programs", nargs="*", default=PROGRAMS)
    a = ap.parse_args()
    if a.numpy_only:
        print(json.dumps({name: timed(importlib.import_module(name), importlib.import_module(name).step, a.steps)
                          for name in a.programs}))
        return
    # NumPy's wheel runs its own OpenBLAS threads, which spin and lose badly on
    # a loaded machine: NumPy is timed both ways and its better time counts
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--numpy-only", "--steps", str(a.steps)]
                       + a.programs, capture_output=True, text=True, env=env)
    np1 = json.loads(r.stdout) if r.returncode == 0 else {}
    if a.jax_only:
        import jax
        print("  jax %s" % jax.__version__)
        for name in a.programs:
            print("  %-10s %s" % (name, jax_check(name)))
        return
    print("Terra (tfvm.terra) vs plain NumPy, ms per step after %d warm-up steps of %d; overlap per co-executed step:"
          % (WARMUP, a.steps))
    print("  NumPy: its better time of its own BLAS threads and OPENBLAS_NUM_THREADS=1 (both shown)")
    print("  %-10s %9s %9s %9s %7s %9s %10s %10s %10s  %s" % (
        "program", "NumPy ms", "(1 thr)", "Terra ms", "speedup", "fallbacks", "Py wait ms", "graph ms", "gr wait ms",
        ""))
    fast = 0
    for name in a.programs:
        t_np, t_t, py_wait, g, f = bench_program(name, a.steps)
        t_np1 = np1.get(name, float("inf"))
        r = min(t_np, t_np1) / t_t
        fast += r >= 1.3
        print("  %-10s %9.3f %9.3f %9.3f %6.2fx %9d %10.3f %10.3f %10.3f  %s" % (
            name, t_np * 1e3, t_np1 * 1e3, t_t * 1e3, r, f.stats["fallbacks"], py_wait * 1e3, g * 1e3,
            max(t_t - g, 0.0) * 1e3, "PASS" if r >= 1.3 else "MISS"))
    print("  %d of %d programs >= 1.3x (target: 4): %s" % (fast, len(a.programs), "PASS" if fast >= 4 else "MISS"))
    jax_rows(a.jax_python)


if __name__ == "__main__":
    main()
