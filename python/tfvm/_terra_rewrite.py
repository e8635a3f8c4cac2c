"""The call-id and loop-id stacks of Terra (docs/terra.md): the decorated
function, and every Python function it calls that has source outside the
standard library and site-packages, is rewritten so that each call site pushes
its call id around the call and each loop pushes (loop id, counter) around
itself and counts its iterations, as the Terra supplement's Figure 1 does."""
import ast
import builtins
import inspect
import itertools
import sys
import sysconfig
import textwrap
import types

import numpy as np

RT_NAME = "__tfvm_terra_rt__"

_ids = itertools.count(1)        # call and loop ids, unique in the process
_rewritten = {}                  # code object -> rewritten function (or None: left alone)
_system_dirs = tuple({sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
                     | {sys.prefix, sys.base_prefix})


class Stacks:
    """The call-id stack and the loop-id stack, for the whole program (one
    thread: Terra's own limit)."""

    def __init__(self):
        self.calls = []
        self.loops = []          # [loop id, counter]
        self.now = None          # where() since the last change (many operations share one place)

    def where(self):
        if self.now is None:
            self.now = tuple(self.calls), tuple(tuple(p) for p in self.loops)
        return self.now


stacks = Stacks()


# callees written in C (NumPy's functions and ufuncs, a Random's methods, a
# list's append, a class): called straight, without the push and pop, as a
# builtin's call site is (their array operations are told apart by line and
# occurrence); a Python loop that calls them each iteration (drawing a mask
# with random.random) would otherwise pay the runtime's call each time
_C_CALLABLES = {types.BuiltinFunctionType, types.BuiltinMethodType, types.MethodWrapperType,
                types.WrapperDescriptorType, types.MethodDescriptorType, type}


def _call(cid, f, *args, **kwargs):
    if type(f) in _C_CALLABLES or isinstance(f, np.ufunc):
        return f(*args, **kwargs)
    g = rewritten(f)
    stacks.calls.append(cid)
    stacks.now = None
    try:
        return g(*args, **kwargs)
    finally:
        stacks.calls.pop()
        stacks.now = None


def _loop_enter(lid):
    """Pushes loop lid's [id, counter]; the rewritten loop keeps the list in
    a local and counts each iteration in it (and clears `stacks.now`) with
    two statements, not a call: a Python loop that draws a mask element by
    element runs its body thousands of times a step."""
    entry = [lid, 0]
    stacks.loops.append(entry)
    stacks.now = None
    return entry


def _loop_exit():
    stacks.loops.pop()
    stacks.now = None


class _Runtime:
    call = staticmethod(_call)
    loop_enter = staticmethod(_loop_enter)
    loop_exit = staticmethod(_loop_exit)
    stacks = stacks


def _rt(attr, *args):
    return ast.Call(func=ast.Attribute(value=ast.Name(id=RT_NAME, ctx=ast.Load()), attr=attr, ctx=ast.Load()),
                    args=list(args), keywords=[])


class _Rewriter(ast.NodeTransformer):
    def __init__(self, globals_):
        self.globals = globals_

    def visit_Call(self, node):
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id in vars(builtins) and node.func.id not in self.globals:
            # a builtin (len, max, float, ...; super and locals look at the
            # calling frame) makes no array operation of its own: its operand's
            # operations are told apart by line and occurrence, and Python-heavy
            # code does not pay a runtime call per builtin call
            return node
        return ast.Call(func=_rt("call").func, args=[ast.Constant(next(_ids)), node.func] + node.args,
                        keywords=node.keywords)

    def _loop(self, node):
        self.generic_visit(node)
        lid = next(_ids)
        entry = "__tfvm_terra_loop%d" % lid
        rt_stacks = ast.Attribute(value=ast.Name(id=RT_NAME, ctx=ast.Load()), attr="stacks", ctx=ast.Load())
        node.body[:0] = [
            ast.AugAssign(target=ast.Subscript(value=ast.Name(id=entry, ctx=ast.Load()), slice=ast.Constant(1),
                                               ctx=ast.Store()), op=ast.Add(), value=ast.Constant(1)),
            ast.Assign(targets=[ast.Attribute(value=rt_stacks, attr="now", ctx=ast.Store())],
                       value=ast.Constant(None))]
        return [ast.Assign(targets=[ast.Name(id=entry, ctx=ast.Store())], value=_rt("loop_enter", ast.Constant(lid))),
                ast.Try(body=[node], handlers=[], orelse=[], finalbody=[ast.Expr(_rt("loop_exit"))])]

    visit_For = visit_While = visit_AsyncFor = _loop


def _user_function(f):
    code = f.__code__
    return not (code.co_filename.startswith("<") or code.co_filename.startswith(_system_dirs)
                or f.__module__ in (None, __name__, "tfvm._terra") or code.co_freevars)


def rewrite_function(f):
    """f with the stacks maintained, or f itself when it cannot be rewritten
    (no source, a closure, a built-in, a library's function)."""
    code = f.__code__
    if code in _rewritten:
        g = _rewritten[code]
        return f if g is None else g
    g = None
    if _user_function(f):
        try:
            src = textwrap.dedent(inspect.getsource(f))
            tree = ast.parse(src)
        except (OSError, TypeError, SyntaxError):
            tree = None
        fn = tree.body[0] if tree is not None and tree.body else None
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name == f.__name__:
            fn.decorator_list = []
            tree = _Rewriter(f.__globals__).visit(tree)
            ast.fix_missing_locations(tree)
            ast.increment_lineno(tree, code.co_firstlineno - 1)
            ns = {}
            f.__globals__.setdefault(RT_NAME, _Runtime)
            exec(compile(tree, code.co_filename, "exec"), f.__globals__, ns)  # noqa: S102 - the user's own source
            g = ns[f.__name__]
            g.__defaults__, g.__kwdefaults__ = f.__defaults__, f.__kwdefaults__
            g.__qualname__ = f.__qualname__
    _rewritten[code] = g
    return f if g is None else g


def rewritten(f):
    """What a rewritten call site calls for callee f."""
    if type(f) is types.FunctionType:
        return rewrite_function(f)
    if type(f) is types.MethodType and type(f.__func__) is types.FunctionType:
        g = rewrite_function(f.__func__)
        return f if g is f.__func__ else types.MethodType(g, f.__self__)
    call = getattr(type(f), "__call__", None)
    if type(call) is types.FunctionType:             # an object called like a function (a layer)
        g = rewrite_function(call)
        return f if g is call else types.MethodType(g, f)
    return f
