"""bench/terra.py — `make bench`: Terra (tfvm.terra, docs/terra.md) against
plain NumPy on the six programs of examples/terra/, in one run.

    python bench/terra.py [--steps N] [--rounds R] [--threads T] [--jax-python PY] [PROGRAM...]

Per program: Terra traces and compiles over one warm-up run, then ROUNDS
rounds each run the program for STEPS steps with plain NumPy (one BLAS
thread, here: OPENBLAS_NUM_THREADS=1, set before NumPy loads), with plain
NumPy on its wheel's own BLAS threads (in a subprocess that runs a round
when asked) and then with Terra, interleaved so that the load of a shared
machine falls on all three alike; per step, the medians over the rounds of
the wall time and, here, of the process's CPU time (every thread's: the
graph's workers too). The better NumPy wall time counts for the speedup
(target: >= 1.3x on four of the six). The graph runs on
tfvm.terra's choice of workers (printed), or T with --threads. Then Terra's
fallbacks after the warm-up and the overlap of Figure 6 of the Terra paper:
per co-executed step, how long Python waited for the graph (blocked in
fetch) and how long the graph waited for Python (the step's time less the
graph's own time, the latter measured by running the same graph on a
recording of the last round's feeds, all queued before it starts). Then which
programs jax.jit compiles unchanged (np swapped for jax.numpy, the rest of
the program as written), run by PY (the bench venv, where jax is installed
from PyPI if pip can). Terra's results are checked against NumPy's, every
round (floats and arrays within 1e-5 relative, the rest equal).
"""
import os
import sys

# before NumPy loads: its wheel's OpenBLAS threads spin, and on a loaded
# machine lose up to 8x; the threaded NumPy runs in a subprocess without this
if "--numpy-threads" not in sys.argv:
    os.environ["OPENBLAS_NUM_THREADS"] = "1"

import argparse  # noqa: E402
import importlib  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
import types  # noqa: E402

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


def timed(m, step_fn, steps, results=None):
    """(wall s, CPU s) per step of one run of `steps` steps: from the end of
    its first step to the end of its last (the program's own work between
    steps included; its setup before the first step not). The run's results
    go to the list `results`."""
    marks = []

    def step(*args, **kwargs):
        out = step_fn(*args, **kwargs)
        marks.append((time.perf_counter(), time.process_time()))
        return out
    out = m.run(step, steps=steps, **SIZES[m.__name__])
    if results is not None:
        results.append(out)
    n = len(marks) - 1
    return (marks[-1][0] - marks[0][0]) / n, (marks[-1][1] - marks[0][1]) / n


def mismatch(a, b):
    """Where two runs' results differ (floats and arrays beyond 1e-5
    relative, anything else unequal), or None."""
    import numpy as np
    if isinstance(a, (list, tuple)):
        if type(a) is not type(b) or len(a) != len(b):
            return "%r against %r" % (a, b)
        return next((m for m in map(mismatch, a, b) if m), None)
    if isinstance(a, (float, np.ndarray)):
        ok = np.allclose(a, b, rtol=1e-5, atol=1e-7)
    else:
        ok = a == b
    return None if ok else "%r against %r" % (a, b)


def graph_alone(f, record):
    """(wall s, CPU s) per step of f's graph on recorded steps: every feed of
    every step queued before the graph starts, then the run's end awaited
    (the values it fetches are queued and dropped, as Python would take
    them); the CPU time is the process's, nearly all of it the workers'."""
    s = f.program.session(threads=f.session_threads)
    t0, c0 = time.perf_counter(), time.process_time()
    for ch, v in record:
        s.feed(ch, v)
    s.feed("go", False)
    s.finish()
    n = max(sum(ch == "go" for ch, _ in record), 1)
    return (time.perf_counter() - t0) / n, (time.process_time() - c0) / n


class ThreadedNumPy:
    """NumPy with its wheel's own BLAS threads, in a subprocess (this process
    set OPENBLAS_NUM_THREADS=1 before NumPy loaded) that runs one round of a
    program when asked, so that its rounds interleave with the others."""

    def __init__(self):
        env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
        self.p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--numpy-threads"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)

    def round(self, name, steps):
        """Wall s per step of one run, or inf if the subprocess failed."""
        try:
            self.p.stdin.write("%s %d\n" % (name, steps))
            self.p.stdin.flush()
            return float(self.p.stdout.readline())
        except (OSError, ValueError):
            return float("inf")

    def close(self):
        self.p.stdin.close()
        self.p.wait()


def numpy_threads_serve():
    """The subprocess of ThreadedNumPy: a line 'PROGRAM STEPS' in, one
    round's wall s per step out."""
    for line in sys.stdin:
        name, steps = line.split()
        m = importlib.import_module(name)
        wall = timed(m, m.step, int(steps))[0]
        time.sleep(0.2)    # OpenBLAS's idle threads spin for about 0.1 s (a core's CPU): not into the next round
        print(wall, flush=True)


def bench_program(name, steps, rounds, threads=0, threaded=None):
    """Medians per step: NumPy (wall, CPU), NumPy with its BLAS threads
    (wall; inf without `threaded`), Terra (wall, CPU); Python's wait per
    co-executed step, the graph's own time per step, Terra's function."""
    import tfvm
    m = importlib.import_module(name)
    f = tfvm.terra(m.step, threads=threads)
    m.run(f, steps=steps, **SIZES[name])          # traces every path the run takes, compiles
    f.stats["fallbacks_warmup"] = f.stats["fallbacks"]
    t_np, t_thr, t_t, res_np, res_t = [], [], [], [], []
    record = []
    wait0 = (f.stats["python_wait_s"], f.stats["coexec_steps"])
    for r in range(rounds):
        t_np.append(timed(m, m.step, steps, res_np))
        t_thr.append((threaded.round(name, steps) if threaded else float("inf"),))
        if r == rounds - 1:
            f.recording, before = record, f.stats["fallbacks"]   # the last round's feeds, for graph_alone
        t_t.append(timed(m, f, steps, res_t))
    if f.stats["fallbacks"] != before:
        record.clear()                            # feeds of two programs: no recording
    f.recording = None
    coexec = f.stats["coexec_steps"] - wait0[1]
    py_wait = (f.stats["python_wait_s"] - wait0[0]) / max(coexec, 1)
    f.close()
    f.mismatch = next((m for m in map(mismatch, res_t, res_np) if m), None)
    g = graph_alone(f, record) if record and f.program else (float("nan"), float("nan"))

    def med(ts, i):
        return statistics.median(t[i] for t in ts)
    return (med(t_np, 0), med(t_np, 1)), med(t_thr, 0), (med(t_t, 0), med(t_t, 1)), py_wait, g, f


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
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0, help="the graph's workers (default: tfvm.terra's choice)")
    ap.add_argument("--jax-python", default=None)
    ap.add_argument("--jax-only", action="store_true")
    ap.add_argument("--numpy-threads", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("programs", nargs="*", default=PROGRAMS)
    a = ap.parse_args()
    if a.numpy_threads:
        numpy_threads_serve()
        return
    if a.jax_only:
        import jax
        print("  jax %s" % jax.__version__)
        for name in a.programs:
            print("  %-10s %s" % (name, jax_check(name)))
        return
    threaded = ThreadedNumPy()
    print("Terra (tfvm.terra) vs plain NumPy, ms per step: medians of %d interleaved rounds of %d steps, "
          "after a warm-up run;" % (a.rounds, a.steps))
    print("  wall and process CPU time (all threads); NumPy with 1 BLAS thread, and with its own BLAS threads "
          "(wall; in a subprocess, interleaved); the better NumPy wall time counts. Overlap per co-executed step.")
    print("  %-10s %9s %7s %9s %9s %7s %3s %8s %5s %8s %8s %7s %8s %6s" % (
        "program", "NumPy ms", "CPU ms", "(threads)", "Terra ms", "CPU ms", "wk", "speedup", "fallb",
        "Py wait", "graph ms", "CPU ms", "gr wait", "bound"))
    fast = wrong = 0
    for name in a.programs:
        (np_w, np_c), np_thr, (t_w, t_c), py_wait, (g_w, g_c), f = bench_program(name, a.steps, a.rounds, a.threads,
                                                                                threaded)
        ratio = min(np_w, np_thr) / t_w
        fast += ratio >= 1.3
        late = f.stats["fallbacks"] - f.stats["fallbacks_warmup"]
        # the best any co-execution with these kernels could do, given a core
        # each: NumPy's CPU time over the larger of the graph's share of it
        # (its CPU time alone) and the rest (Python's own work)
        bound = np_c / max(g_c, np_c - g_c)
        print("  %-10s %9.3f %7.3f %9.3f %9.3f %7.3f %3d %7.2fx %5d %8.3f %8.3f %7.3f %8.3f %5.2fx  %s" % (
            name, np_w * 1e3, np_c * 1e3, np_thr * 1e3, t_w * 1e3, t_c * 1e3, f.session_threads, ratio, late,
            py_wait * 1e3,
            g_w * 1e3, g_c * 1e3, max(t_w - g_w, 0.0) * 1e3, bound, "PASS" if ratio >= 1.3 else "MISS"),
            flush=True)
        if f.mismatch:
            print("  %-10s Terra's results differ from NumPy's: %s" % (name, f.mismatch[:200]))
            wrong += 1
    threaded.close()
    print("  %d of %d programs >= 1.3x (target: 4): %s; Terra's results %s NumPy's (1e-5 relative)" % (
        fast, len(a.programs), "PASS" if fast >= 4 else "MISS", "match" if not wrong else "DIFFER from"))
    print("  wk: the graph's workers (docs/terra.md: the cores other processes leave free when the graph is the"
          " critical path); fallb: Terra's fallbacks after the warm-up run; Py wait: Python blocked in fetch; graph ms / CPU ms: the"
          " graph alone on the recorded feeds; gr wait: Terra ms less graph ms; bound: NumPy CPU ms / max(graph CPU"
          " ms, NumPy CPU ms - graph CPU ms), the most that overlapping the graph with Python can gain with these"
          " kernels")
    jax_rows(a.jax_python)


if __name__ == "__main__":
    main()
