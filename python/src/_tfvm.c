/* python/src/_tfvm.c — tfvm._tfvm, the C half of the Python package: programs,
 * runs and sessions over the public API (include/tfvm.h) with NumPy arrays in
 * and out. Inputs are wrapped, not copied; results own tfvm's buffers. The
 * Python half (tfvm/__init__.py) builds the ONNX Runtime surface on this. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

#include "tfvm.h"
#include "tfvm_debug.h"

/* ---- Errors ----------------------------------------------------------------
 * tfvm.Error's subclasses, one per tfvm_status (tfvm/__init__.py makes them
 * and hands them over in status order at import). */
#define N_STATUS ((int)TFVM_ERR_DEVICE + 1)
static PyObject *err_class[N_STATUS];

static PyObject *error_class(tfvm_status st)
{
    int i = (int)st;
    if (i <= 0 || i >= N_STATUS || !err_class[i])
        i = (int)TFVM_ERR_INTERNAL;
    return err_class[i] ? err_class[i] : PyExc_RuntimeError;
}

/* Raises the subclass of st with tfvm's message, and the record's other
 * fields (instruction, tag, source position) as attributes. Returns NULL. */
static PyObject *raise_error(tfvm_status st, const char *message, const char *instr, const char *tag,
                             const char *where)
{
    PyObject *cls = error_class(st);
    PyObject *exc = PyObject_CallFunction(cls, "s", message ? message : "");
    if (!exc)
        return NULL;
    const char *names[] = {"code", "instr", "tag", "where"};
    const char *vals[] = {tfvm_status_name(st), instr ? instr : "", tag ? tag : "", where ? where : ""};
    for (int i = 0; i < 4; i++) {
        PyObject *s = PyUnicode_DecodeUTF8(vals[i], (Py_ssize_t)strlen(vals[i]), "replace");
        if (!s || PyObject_SetAttrString(exc, names[i], s) < 0) {
            Py_XDECREF(s);
            Py_DECREF(exc);
            return NULL;
        }
        Py_DECREF(s);
    }
    PyErr_SetObject(cls, exc);
    Py_DECREF(exc);
    return NULL;
}

static PyObject *raise_err(tfvm_status st, const tfvm_error *e)
{
    return raise_error(st, e->message, e->instr, e->tag, e->where);
}

static PyObject *raise_msg(tfvm_status st, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    PyOS_vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return raise_error(st, buf, "", "", "");
}

/* ---- Input buffers wrapped without a copy -----------------------------------
 * A wrapped tensor holds a reference to its NumPy array, dropped by the
 * tensor's release callback. That may run on a VM worker thread that has no
 * Python state: then the array goes on a list that the next call from Python
 * (or a pending call) empties. Release never waits for the GIL, so no thread
 * of the VM can deadlock on it. */
typedef struct hold {
    PyObject *obj;
    struct hold *next;
} hold;

static pthread_mutex_t defer_lock = PTHREAD_MUTEX_INITIALIZER;
static hold *deferred;
static atomic_int defer_scheduled;

static void drain_deferred(void)
{
    /* set, under the lock, whenever the list becomes non-empty */
    if (!atomic_load_explicit(&defer_scheduled, memory_order_acquire))
        return;
    pthread_mutex_lock(&defer_lock);
    hold *h = deferred;
    deferred = NULL;
    atomic_store(&defer_scheduled, 0);
    pthread_mutex_unlock(&defer_lock);
    while (h) {
        hold *next = h->next;
        Py_DECREF(h->obj);
        PyMem_RawFree(h);
        h = next;
    }
}

static int drain_pending(void *unused)
{
    (void)unused;
    drain_deferred();
    return 0;
}

static void release_array(void *ud, void *data)
{
    (void)data;
    hold *h = ud;
    if (PyGILState_Check()) {
        Py_DECREF(h->obj);
        PyMem_RawFree(h);
        return;
    }
    pthread_mutex_lock(&defer_lock);
    h->next = deferred;
    deferred = h;
    int first = !atomic_exchange(&defer_scheduled, 1);
    pthread_mutex_unlock(&defer_lock);
    if (first)
        Py_AddPendingCall(drain_pending, NULL); /* may fail when its queue is full: drained later */
}

/* ---- dtypes ---------------------------------------------------------------- */
static int npy_of(tfvm_dtype d)
{
    switch (d) {
    case TFVM_BOOL: return NPY_BOOL;
    case TFVM_I32: return NPY_INT32;
    case TFVM_I64: return NPY_INT64;
    case TFVM_F32: return NPY_FLOAT32;
    case TFVM_F64: return NPY_FLOAT64;
    case TFVM_U8: return NPY_UINT8;
    case TFVM_I8: return NPY_INT8;
    case TFVM_I16: return NPY_INT16;
    case TFVM_U16: return NPY_UINT16;
    case TFVM_U32: return NPY_UINT32;
    case TFVM_U64: return NPY_UINT64;
    case TFVM_F16: return NPY_FLOAT16;
    case TFVM_BF16: break; /* NumPy has none */
    }
    return -1;
}

/* 0 when NumPy's type has no tfvm dtype. */
static tfvm_dtype dtype_of(int typenum)
{
    switch (typenum) {
    case NPY_BOOL: return TFVM_BOOL;
    case NPY_INT8: return TFVM_I8;
    case NPY_UINT8: return TFVM_U8;
    case NPY_INT16: return TFVM_I16;
    case NPY_UINT16: return TFVM_U16;
    case NPY_FLOAT16: return TFVM_F16;
    default: break;
    }
    /* NPY_UINT32 and NPY_UINT64 alias unsigned int, long or long long likewise */
    size_t usize = typenum == NPY_UINT ? sizeof(unsigned) : typenum == NPY_ULONG ? sizeof(unsigned long)
                 : typenum == NPY_ULONGLONG ? sizeof(unsigned long long) : 0;
    if (usize == 4)
        return TFVM_U32;
    if (usize == 8)
        return TFVM_U64;
    /* NPY_INT32 and NPY_INT64 alias int, long or long long, whichever has the size */
    size_t size = typenum == NPY_INT ? sizeof(int) : typenum == NPY_LONG ? sizeof(long)
                : typenum == NPY_LONGLONG ? sizeof(long long) : 0;
    if (size == 4)
        return TFVM_I32;
    if (size == 8)
        return TFVM_I64;
    if (typenum == NPY_FLOAT32)
        return TFVM_F32;
    if (typenum == NPY_FLOAT64)
        return TFVM_F64;
    return (tfvm_dtype)0;
}

static tfvm_dtype dtype_by_name(const char *s)
{
    for (int d = TFVM_BOOL; d <= TFVM_BF16; d++)
        if (strcmp(tfvm_dtype_name((tfvm_dtype)d), s) == 0)
            return (tfvm_dtype)d;
    return (tfvm_dtype)0;
}

/* ---- Python values -> tfvm values -------------------------------------------- */

/* The tensor over arr's buffer (arr: C-contiguous, aligned, native order, a
 * tfvm dtype); takes its own reference to arr. NULL with an exception set. */
static tfvm_tensor *wrap_array(PyArrayObject *arr, tfvm_dtype dt)
{
    int rank = PyArray_NDIM(arr);
    if (rank > TFVM_MAX_RANK) {
        raise_msg(TFVM_ERR_ARGUMENT, "an array of rank %d: tfvm tensors have at most %d dimensions", rank,
                  TFVM_MAX_RANK);
        return NULL;
    }
    int64_t dims[TFVM_MAX_RANK];
    for (int i = 0; i < rank; i++)
        dims[i] = (int64_t)PyArray_DIM(arr, i);
    hold *h = PyMem_RawMalloc(sizeof *h);
    if (!h) {
        PyErr_NoMemory();
        return NULL;
    }
    h->obj = (PyObject *)arr;
    h->next = NULL;
    /* an empty array may have no buffer of its own; any aligned pointer does */
    static int64_t empty_buf[1];
    void *data = PyArray_SIZE(arr) ? PyArray_DATA(arr) : (void *)empty_buf;
    tfvm_tensor *t = tfvm_tensor_wrap(dt, rank, dims, data, release_array, h, NULL);
    if (!t) {
        PyMem_RawFree(h);
        raise_msg(TFVM_ERR_NOMEM, "out of memory wrapping an array");
        return NULL;
    }
    Py_INCREF(arr);
    return t;
}

/* A tensor from any array-like: an ndarray that tfvm can read in place is
 * wrapped; anything else is converted once, to `want` (a declared dtype, or 0:
 * keep the value's own type). NULL with an exception set. */
static tfvm_tensor *to_tensor(PyObject *obj, tfvm_dtype want)
{
    if (PyArray_Check(obj)) {
        PyArrayObject *a = (PyArrayObject *)obj;
        tfvm_dtype dt = dtype_of(PyArray_TYPE(a));
        if (!dt) {
            PyObject *s = PyObject_Str((PyObject *)PyArray_DESCR(a));
            raise_msg(TFVM_ERR_ARGUMENT, "an array of dtype %s: tfvm has bool, int8, uint8, int16, uint16, int32, uint32, int64, uint64, float16, float32 and float64",
                      s ? PyUnicode_AsUTF8(s) : "?");
            Py_XDECREF(s);
            return NULL;
        }
        int flags = PyArray_FLAGS(a);
        if ((flags & NPY_ARRAY_C_CONTIGUOUS) && (flags & NPY_ARRAY_ALIGNED) && PyArray_ISNOTSWAPPED(a))
            return wrap_array(a, dt);
        PyArrayObject *c = (PyArrayObject *)PyArray_FromAny(obj, PyArray_DescrFromType(npy_of(dt)), 0, 0,
                                                           NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED, NULL);
        if (!c)
            return NULL;
        tfvm_tensor *t = wrap_array(c, dt);
        Py_DECREF(c);
        return t;
    }
    PyArray_Descr *descr = want ? PyArray_DescrFromType(npy_of(want)) : NULL;
    PyArrayObject *c = (PyArrayObject *)PyArray_FromAny(obj, descr, 0, 0,
                                                       NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED, NULL);
    if (!c)
        return NULL;
    tfvm_dtype dt = dtype_of(PyArray_TYPE(c));
    tfvm_tensor *t = NULL;
    if (!dt) {
        /* a Python float list gives float64, an int list int64: both are tfvm's */
        raise_msg(TFVM_ERR_ARGUMENT, "a value of a type tfvm has no dtype for");
    } else {
        t = wrap_array(c, dt);
    }
    Py_DECREF(c);
    return t;
}

/* A scalar value of dtype dt from a Python number (or a 0-d array). */
static int to_scalar(PyObject *obj, tfvm_dtype dt, tfvm_value *out)
{
    if (PyArray_Check(obj) && PyArray_NDIM((PyArrayObject *)obj) == 0) {
        PyObject *item = PyArray_GETITEM((PyArrayObject *)obj, PyArray_DATA((PyArrayObject *)obj));
        if (!item)
            return -1;
        int rc = to_scalar(item, dt, out);
        Py_DECREF(item);
        return rc;
    }
    if (dt == TFVM_BOOL) {
        int b = PyObject_IsTrue(obj);
        if (b < 0)
            return -1;
        *out = tfvm_bool(b != 0);
        return 0;
    }
    if (dt == TFVM_F32 || dt == TFVM_F64 || dt == TFVM_F16 || dt == TFVM_BF16) {
        double v = PyFloat_AsDouble(obj);
        if (v == -1.0 && PyErr_Occurred())
            return -1;
        *out = dt == TFVM_F32 ? tfvm_f32((float)v) : dt == TFVM_F64 ? tfvm_f64(v) : dt == TFVM_F16 ? tfvm_f16(v) : tfvm_bf16(v);
        return 0;
    }
    if (dt == TFVM_U64) {
        PyObject *idx = PyNumber_Index(obj);
        if (!idx)
            return -1;
        unsigned long long u = PyLong_AsUnsignedLongLong(idx);
        Py_DECREF(idx);
        if (u == (unsigned long long)-1 && PyErr_Occurred())
            return -1;
        *out = (tfvm_value){.dtype = TFVM_U64, .as.u64 = u};
        return 0;
    }
    PyObject *idx = PyNumber_Index(obj);
    if (!idx)
        return -1;
    long long v = PyLong_AsLongLong(idx);
    Py_DECREF(idx);
    if (v == -1 && PyErr_Occurred())
        return -1;
    long long lo = dt == TFVM_I32 ? INT32_MIN : dt == TFVM_I8 ? INT8_MIN : dt == TFVM_I16 ? INT16_MIN
                 : dt == TFVM_I64 ? INT64_MIN : 0;
    long long hi = dt == TFVM_I32 ? INT32_MAX : dt == TFVM_U8 ? UINT8_MAX : dt == TFVM_I8 ? INT8_MAX
                 : dt == TFVM_I16 ? INT16_MAX : dt == TFVM_U16 ? UINT16_MAX : dt == TFVM_U32 ? (long long)UINT32_MAX : INT64_MAX;
    if (v < lo || v > hi) {
        raise_msg(TFVM_ERR_ARGUMENT, "%lld does not fit %s", v, tfvm_dtype_name(dt));
        return -1;
    }
    switch (dt) {
    case TFVM_I32: *out = tfvm_i32((int32_t)v); break;
    case TFVM_U8: *out = tfvm_u8((uint8_t)v); break;
    case TFVM_I8: *out = tfvm_i8((int8_t)v); break;
    case TFVM_I16: *out = (tfvm_value){.dtype = TFVM_I16, .as.i16 = (int16_t)v}; break;
    case TFVM_U16: *out = (tfvm_value){.dtype = TFVM_U16, .as.u16 = (uint16_t)v}; break;
    case TFVM_U32: *out = (tfvm_value){.dtype = TFVM_U32, .as.u32 = (uint32_t)v}; break;
    default: *out = tfvm_i64((int64_t)v); break;
    }
    return 0;
}

/* The value for parameter p (NULL: no declaration, e.g. a feed): a scalar
 * parameter takes a number; a tensor parameter an array-like. Without a
 * declaration, arrays stay tensors, NumPy scalars keep their dtype, and Python
 * bool, int and float become bool, i32 (i64 when it does not fit) and f64. */
static int to_value(PyObject *obj, const tfvm_param_info *p, tfvm_value *out)
{
    if (p && !p->is_tensor)
        return to_scalar(obj, p->dtype, out);
    if (!p && !PyArray_Check(obj)) {
        if (PyBool_Check(obj))
            return to_scalar(obj, TFVM_BOOL, out);
        if (PyLong_Check(obj)) {
            int overflow = 0;
            long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
            if (!overflow && v >= INT32_MIN && v <= INT32_MAX) {
                *out = tfvm_i32((int32_t)v);
                return 0;
            }
            return to_scalar(obj, TFVM_I64, out);
        }
        if (PyFloat_Check(obj))
            return to_scalar(obj, TFVM_F64, out);
        if (PyArray_IsScalar(obj, Generic)) {
            PyArray_Descr *d = PyArray_DescrFromScalar(obj);
            tfvm_dtype dt = d ? dtype_of(d->type_num) : (tfvm_dtype)0;
            Py_XDECREF(d);
            if (dt)
                return to_scalar(obj, dt, out);
        }
    }
    tfvm_tensor *t = to_tensor(obj, p ? p->dtype : (tfvm_dtype)0);
    if (!t)
        return -1;
    *out = tfvm_tensor_value(t);
    return 0;
}

static void release_values(tfvm_value *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        tfvm_value_release(&v[i]);
}

/* ---- tfvm values -> Python values --------------------------------------------- */

static void tensor_capsule_free(PyObject *cap)
{
    tfvm_tensor_free(PyCapsule_GetPointer(cap, "tfvm.tensor"));
}

/* An ndarray over the tensor's buffer, owning the reference, writable like
 * ONNX Runtime's results. The buffer is only handed over when nobody else sees
 * it: a tensor shared with the program (a constant) or another holder, or
 * one over the buffer of one of `ins` (an input passed straight through), is
 * copied instead. Steals t. */
static PyObject *from_tensor(tfvm_tensor *t, const tfvm_value *ins, size_t n_ins)
{
    int rank = tfvm_tensor_rank(t);
    npy_intp dims[TFVM_MAX_RANK];
    const int64_t *d = tfvm_tensor_dims(t);
    for (int i = 0; i < rank; i++)
        dims[i] = (npy_intp)d[i];
    int typenum = npy_of(tfvm_tensor_dtype(t));
    if (typenum < 0) {
        const char *name = tfvm_dtype_name(tfvm_tensor_dtype(t));
        tfvm_tensor_free(t);
        return raise_msg(TFVM_ERR_UNSUPPORTED, "a %s result: NumPy has no such dtype", name);
    }
    void *data = tfvm_tensor_data(t);
    size_t nbytes = (size_t)tfvm_tensor_count(t) * tfvm_dtype_size(tfvm_tensor_dtype(t));
    bool own = nbytes > 0 && tfvm_tensor_unique(t);
    for (size_t i = 0; i < n_ins && own; i++) {
        if (!ins[i].tensor)
            continue;
        const char *b = tfvm_tensor_cdata(ins[i].tensor);
        size_t n = (size_t)tfvm_tensor_count(ins[i].tensor) * tfvm_dtype_size(ins[i].dtype);
        own = !((const char *)data < b + n && b < (const char *)data + nbytes);
    }
    if (!own) {
        PyObject *a = PyArray_SimpleNew(rank, dims, typenum);
        if (a && nbytes)
            memcpy(PyArray_DATA((PyArrayObject *)a), data, nbytes);
        tfvm_tensor_free(t);
        return a;
    }
    PyObject *cap = PyCapsule_New(t, "tfvm.tensor", tensor_capsule_free);
    if (!cap) {
        tfvm_tensor_free(t);
        return NULL;
    }
    PyObject *a = PyArray_New(&PyArray_Type, rank, dims, typenum, NULL, data, 0, NPY_ARRAY_CARRAY, NULL);
    if (!a || PyArray_SetBaseObject((PyArrayObject *)a, cap) < 0) {
        Py_XDECREF(a);
        Py_DECREF(cap);
        return NULL;
    }
    return a;
}

/* A result as Python wants it: tensors as arrays; scalars as Python numbers,
 * or 0-d arrays when as_array (ONNX Runtime's run returns only arrays).
 * Takes over v's reference. */
static PyObject *from_value(tfvm_value *v, bool as_array, const tfvm_value *ins, size_t n_ins)
{
    if (v->tensor) {
        tfvm_tensor *t = v->tensor;
        v->tensor = NULL;
        return from_tensor(t, ins, n_ins);
    }
    PyObject *s;
    switch (v->dtype) {
    case TFVM_BOOL: s = PyBool_FromLong(v->as.b); break;
    case TFVM_I32: s = PyLong_FromLong(v->as.i32); break;
    case TFVM_I64: s = PyLong_FromLongLong(v->as.i64); break;
    case TFVM_F32: s = PyFloat_FromDouble(v->as.f32); break;
    case TFVM_F64: s = PyFloat_FromDouble(v->as.f64); break;
    case TFVM_U8: s = PyLong_FromLong(v->as.u8); break;
    case TFVM_I8: s = PyLong_FromLong(v->as.i8); break;
    case TFVM_I16: s = PyLong_FromLong(v->as.i16); break;
    case TFVM_U16: s = PyLong_FromLong(v->as.u16); break;
    case TFVM_U32: s = PyLong_FromUnsignedLong(v->as.u32); break;
    case TFVM_U64: s = PyLong_FromUnsignedLongLong(v->as.u64); break;
    case TFVM_F16: case TFVM_BF16: s = PyFloat_FromDouble(tfvm_half_value(*v)); break;
    default: return raise_msg(TFVM_ERR_INTERNAL, "a result of unknown dtype %d", (int)v->dtype);
    }
    if (!as_array || !s)
        return s;
    PyObject *a = PyArray_FROMANY(s, npy_of(v->dtype), 0, 0, NPY_ARRAY_DEFAULT);
    Py_DECREF(s);
    return a;
}

/* ---- Ctrl-C ----------------------------------------------------------------------
 * While the main thread runs (or fetches), SIGINT also interrupts that VM; the
 * handler then calls the one it displaced (Python's, which raises
 * KeyboardInterrupt once the call returns). It is installed at the first run
 * and again whenever someone replaced it (signal.signal), never over SIG_DFL
 * or SIG_IGN. */
static _Atomic(tfvm_vm *) sigint_vm;
static struct sigaction sigint_prev;
static unsigned long main_ident;

static void on_sigint(int sig, siginfo_t *info, void *uc)
{
    tfvm_vm *vm = atomic_load(&sigint_vm);
    if (vm)
        tfvm_interrupt(vm);
    if (sigint_prev.sa_flags & SA_SIGINFO) {
        if (sigint_prev.sa_sigaction)
            sigint_prev.sa_sigaction(sig, info, uc);
    } else if (sigint_prev.sa_handler != SIG_DFL && sigint_prev.sa_handler != SIG_IGN) {
        sigint_prev.sa_handler(sig);
    }
}

/* Registers vm for Ctrl-C when called on the main thread; returns whether it did. */
static bool sigint_arm(tfvm_vm *vm)
{
    if (PyThread_get_thread_ident() != main_ident)
        return false;
    struct sigaction cur;
    if (sigaction(SIGINT, NULL, &cur) != 0)
        return false;
    if (!(cur.sa_flags & SA_SIGINFO) || cur.sa_sigaction != on_sigint) {
        if (!(cur.sa_flags & SA_SIGINFO) && (cur.sa_handler == SIG_DFL || cur.sa_handler == SIG_IGN))
            return false;
        struct sigaction ours;
        memset(&ours, 0, sizeof ours);
        ours.sa_sigaction = on_sigint;
        ours.sa_flags = SA_SIGINFO | SA_ONSTACK | (cur.sa_flags & SA_RESTART);
        ours.sa_mask = cur.sa_mask;
        sigint_prev = cur;
        if (sigaction(SIGINT, &ours, NULL) != 0)
            return false;
    }
    atomic_store(&sigint_vm, vm);
    return true;
}

static void sigint_disarm(bool armed)
{
    if (armed)
        atomic_store(&sigint_vm, NULL);
}

/* After a call that failed with st: KeyboardInterrupt when Ctrl-C stopped it
 * (PyErr_CheckSignals raises it), else 0. -1 with the exception set. */
static int check_signals(tfvm_status st)
{
    (void)st;
    return PyErr_CheckSignals();
}

/* ---- Program ------------------------------------------------------------------ */

/* VMs kept for the next run with the same settings: a run takes one (or makes
 * one) and gives it back, so that threads running at once each have their own.
 * The list is only touched with the GIL held. */
#define VM_CACHE 8
typedef struct cached_vm {
    tfvm_vm *vm;
    int threads;
    int device;
} cached_vm;

typedef struct {
    PyObject_HEAD
    tfvm_program *prog;
    cached_vm cache[VM_CACHE];
    int n_cache;
} ProgramObject;

static PyTypeObject ProgramType;

static tfvm_vm *take_vm(ProgramObject *self, int threads, int device)
{
    for (int i = self->n_cache - 1; i >= 0; i--) {
        if (self->cache[i].threads == threads && self->cache[i].device == device) {
            tfvm_vm *vm = self->cache[i].vm;
            self->cache[i] = self->cache[--self->n_cache];
            return vm;
        }
    }
    tfvm_config cfg;
    tfvm_config_init(&cfg);
    cfg.threads = threads;
    cfg.device = (tfvm_device)device;
    tfvm_vm *vm = NULL;
    tfvm_error err;
    memset(&err, 0, sizeof err);
    tfvm_status st;
    Py_BEGIN_ALLOW_THREADS
    st = tfvm_vm_new_ex(self->prog, &cfg, &vm, &err);
    Py_END_ALLOW_THREADS
    if (st != TFVM_OK) {
        raise_err(st, &err);
        return NULL;
    }
    return vm;
}

static void give_vm(ProgramObject *self, tfvm_vm *vm, int threads, int device)
{
    if (self->n_cache < VM_CACHE) {
        self->cache[self->n_cache++] = (cached_vm){vm, threads, device};
        return;
    }
    Py_BEGIN_ALLOW_THREADS
    tfvm_vm_free(vm);
    Py_END_ALLOW_THREADS
}

static void program_dealloc(ProgramObject *self)
{
    for (int i = 0; i < self->n_cache; i++)
        tfvm_vm_free(self->cache[i].vm);
    tfvm_program_free(self->prog);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *new_program(tfvm_program *p)
{
    ProgramObject *o = PyObject_New(ProgramObject, &ProgramType);
    if (!o) {
        tfvm_program_free(p);
        return NULL;
    }
    o->prog = p;
    o->n_cache = 0;
    return (PyObject *)o;
}

static PyObject *param_tuple(const tfvm_param_info *p)
{
    PyObject *dims;
    if (p->rank > 0 && p->dims) {
        dims = PyTuple_New(p->rank);
        if (!dims)
            return NULL;
        for (int i = 0; i < p->rank; i++) {
            PyObject *d = p->dims[i] < 0 ? Py_NewRef(Py_None) : PyLong_FromLongLong(p->dims[i]);
            if (!d) {
                Py_DECREF(dims);
                return NULL;
            }
            PyTuple_SET_ITEM(dims, i, d);
        }
    } else if (p->rank == 0) {
        dims = PyTuple_New(0);
    } else {
        dims = Py_NewRef(Py_None);
    }
    if (!dims)
        return NULL;
    return Py_BuildValue("(ssNOO)", p->name ? p->name : "", tfvm_dtype_name(p->dtype), dims,
                         p->is_tensor ? Py_True : Py_False, p->has_default ? Py_True : Py_False);
}

static PyObject *params_list(const tfvm_param_info *ps, size_t n)
{
    PyObject *l = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; l && i < n; i++) {
        PyObject *t = param_tuple(&ps[i]);
        if (!t) {
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, (Py_ssize_t)i, t);
    }
    return l;
}

/* [(name, [(param, dtype, shape, is_tensor, has_default)...], [results...]), ...] */
static PyObject *program_entries(ProgramObject *self, PyObject *unused)
{
    (void)unused;
    size_t n = tfvm_program_entry_count(self->prog);
    PyObject *l = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; l && i < n; i++) {
        tfvm_entry_info e;
        tfvm_status st = tfvm_program_entry(self->prog, i, &e);
        if (st != TFVM_OK) {
            Py_DECREF(l);
            return raise_msg(st, "entry %zu: cannot be read", i);
        }
        PyObject *t = Py_BuildValue("(sNN)", e.name, params_list(e.params, e.n_params),
                                    params_list(e.results, e.n_results));
        if (!t) {
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, (Py_ssize_t)i, t);
    }
    return l;
}

static PyObject *program_save(ProgramObject *self, PyObject *args)
{
    PyObject *path = Py_None;
    if (!PyArg_ParseTuple(args, "|O", &path))
        return NULL;
    tfvm_error err;
    tfvm_status st;
    if (path == Py_None) {
        void *data = NULL;
        size_t size = 0;
        Py_BEGIN_ALLOW_THREADS
        st = tfvm_program_save_memory(self->prog, &data, &size, &err);
        Py_END_ALLOW_THREADS
        if (st != TFVM_OK)
            return raise_err(st, &err);
        PyObject *b = PyBytes_FromStringAndSize(data, (Py_ssize_t)size);
        tfvm_program_buffer_free(self->prog, data, size);
        return b;
    }
    PyObject *fs = NULL;
    if (!PyUnicode_FSConverter(path, &fs))
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    st = tfvm_program_save_file(self->prog, PyBytes_AS_STRING(fs), &err);
    Py_END_ALLOW_THREADS
    Py_DECREF(fs);
    if (st != TFVM_OK)
        return raise_err(st, &err);
    Py_RETURN_NONE;
}

static PyObject *program_dis(ProgramObject *self, PyObject *unused)
{
    (void)unused;
    size_t n = tfvm_program_inst_count(self->prog);
    size_t cap = 4096, len = 0;
    char *out = PyMem_Malloc(cap);
    if (!out)
        return PyErr_NoMemory();
    for (uint32_t i = 0; i < n; i++) {
        char line[512];
        size_t k = tfvm_inst_format(self->prog, i, line, sizeof line);
        if (k >= sizeof line)
            k = sizeof line - 1;
        if (len + k + 2 > cap) {
            cap = 2 * (len + k + 2);
            char *grown = PyMem_Realloc(out, cap);
            if (!grown) {
                PyMem_Free(out);
                return PyErr_NoMemory();
            }
            out = grown;
        }
        memcpy(out + len, line, k);
        len += k;
        out[len++] = '\n';
    }
    PyObject *s = PyUnicode_DecodeUTF8(out, (Py_ssize_t)len, "replace");
    PyMem_Free(out);
    return s;
}

/* The entry's index from a name or None (the first entry). -1 with an exception set. */
static int entry_index(ProgramObject *self, PyObject *entry)
{
    if (entry == Py_None)
        return tfvm_program_entry_count(self->prog) > 0 ? 0 : -1;
    const char *name = PyUnicode_AsUTF8(entry);
    if (!name)
        return -1;
    int i = tfvm_program_find_entry(self->prog, name);
    if (i < 0)
        raise_msg(TFVM_ERR_ARGUMENT, "no entry named '%s'", name);
    return i;
}

/* The arguments of entry e from positional args and keyword args by
 * parameter name, converted; vals has e->n_params slots. -1 with an exception set. */
static int collect_args(const tfvm_entry_info *e, PyObject *args, PyObject *kwargs, tfvm_value *vals)
{
    Py_ssize_t npos = args ? PyTuple_GET_SIZE(args) : 0;
    if ((size_t)npos > e->n_params) {
        raise_msg(TFVM_ERR_ARGUMENT, "entry '%s' takes %zu arguments, got %zd", e->name, e->n_params, npos);
        return -1;
    }
    if (kwargs) {
        PyObject *k, *v;
        Py_ssize_t pos = 0;
        while (PyDict_Next(kwargs, &pos, &k, &v)) {
            const char *name = PyUnicode_Check(k) ? PyUnicode_AsUTF8(k) : "?";
            bool known = false;
            for (size_t j = 0; name && j < e->n_params && !known; j++)
                known = e->params[j].name && strcmp(e->params[j].name, name) == 0;
            if (!known) {
                raise_msg(TFVM_ERR_ARGUMENT, "entry '%s' has no parameter '%s'", e->name, name ? name : "?");
                return -1;
            }
        }
    }
    size_t i;
    for (i = 0; i < e->n_params; i++) {
        PyObject *v = NULL;
        if ((Py_ssize_t)i < npos) {
            v = PyTuple_GET_ITEM(args, i);
            if (kwargs && e->params[i].name && PyDict_GetItemString(kwargs, e->params[i].name)) {
                raise_msg(TFVM_ERR_ARGUMENT, "argument '%s' of entry '%s' given twice", e->params[i].name, e->name);
                goto fail;
            }
        } else if (kwargs && e->params[i].name) {
            v = PyDict_GetItemString(kwargs, e->params[i].name);
        }
        if (!v && e->params[i].has_default) { /* left to its default */
            vals[i] = tfvm_default();
            continue;
        }
        if (!v) {
            raise_msg(TFVM_ERR_ARGUMENT, "missing argument %zu '%s' of entry '%s'", i + 1,
                      e->params[i].name ? e->params[i].name : "", e->name);
            goto fail;
        }
        if (to_value(v, &e->params[i], &vals[i]) < 0)
            goto fail;
    }
    return 0;
fail:
    release_values(vals, i);
    return -1;
}

#define MAX_VALUES 256

/* Runs entry ei with vals on a VM of (threads, device), GIL released, Ctrl-C
 * armed; results into res. On failure raises and returns -1 (vals untouched). */
static int run_values(ProgramObject *self, int ei, const tfvm_entry_info *e, tfvm_value *vals,
                      tfvm_value *res, int threads, int device)
{
    tfvm_vm *vm = take_vm(self, threads, device);
    if (!vm)
        return -1;
    bool armed = sigint_arm(vm);
    tfvm_status st;
    Py_BEGIN_ALLOW_THREADS
    st = tfvm_run(vm, e->name, vals, e->n_params, res, e->n_results);
    Py_END_ALLOW_THREADS
    sigint_disarm(armed);
    (void)ei;
    if (st != TFVM_OK) {
        tfvm_error err = *tfvm_last_error(vm);
        give_vm(self, vm, threads, device);
        if (check_signals(st) < 0)
            return -1;
        raise_err(st, &err);
        return -1;
    }
    give_vm(self, vm, threads, device);
    return 0;
}

static int parse_device(PyObject *dev, int *out)
{
    if (dev == Py_None) {
        *out = TFVM_DEVICE_CPU;
        return 0;
    }
    const char *s = PyUnicode_AsUTF8(dev);
    if (!s)
        return -1;
    if (strcmp(s, "cpu") == 0)
        *out = TFVM_DEVICE_CPU;
    else if (strcmp(s, "cuda") == 0)
        *out = TFVM_DEVICE_CUDA;
    else if (strcmp(s, "auto") == 0)
        *out = TFVM_DEVICE_AUTO;
    else {
        raise_msg(TFVM_ERR_ARGUMENT, "unknown device '%s' (cpu, cuda or auto)", s);
        return -1;
    }
    return 0;
}

/* _run(entry, args, kwargs, threads, device) -> tuple of results (Python
 * scalars for scalar results). */
static PyObject *program_run(ProgramObject *self, PyObject *args)
{
    PyObject *entry, *pos, *kw, *dev;
    int threads;
    if (!PyArg_ParseTuple(args, "OO!OiO", &entry, &PyTuple_Type, &pos, &kw, &threads, &dev))
        return NULL;
    drain_deferred();
    int device;
    if (parse_device(dev, &device) < 0)
        return NULL;
    int ei = entry_index(self, entry);
    if (ei < 0)
        return PyErr_Occurred() ? NULL : raise_msg(TFVM_ERR_ARGUMENT, "the program has no entry");
    tfvm_entry_info e;
    tfvm_program_entry(self->prog, (size_t)ei, &e);
    if (e.n_params > MAX_VALUES || e.n_results > MAX_VALUES)
        return raise_msg(TFVM_ERR_ARGUMENT, "entry '%s': more than %d parameters or results", e.name, MAX_VALUES);
    tfvm_value vals[MAX_VALUES], res[MAX_VALUES];
    if (collect_args(&e, pos, kw == Py_None ? NULL : kw, vals) < 0)
        return NULL;
    int rc = run_values(self, ei, &e, vals, res, threads, device);
    PyObject *out = NULL;
    if (rc == 0) {
        out = PyTuple_New((Py_ssize_t)e.n_results);
        for (size_t i = 0; i < e.n_results; i++) {
            PyObject *r = out ? from_value(&res[i], false, vals, e.n_params) : NULL;
            if (!r) {
                Py_CLEAR(out);
                release_values(res + i, e.n_results - i);
                break;
            }
            PyTuple_SET_ITEM(out, (Py_ssize_t)i, r);
        }
    }
    release_values(vals, e.n_params);
    return out;
}

/* _run_feed(output_names or None, feed dict, threads, device) -> list of
 * arrays: ONNX Runtime's session.run on the first entry. */
static PyObject *program_run_feed(ProgramObject *self, PyObject *args)
{
    PyObject *names, *feed, *dev;
    int threads;
    if (!PyArg_ParseTuple(args, "OO!iO", &names, &PyDict_Type, &feed, &threads, &dev))
        return NULL;
    drain_deferred();
    int device;
    if (parse_device(dev, &device) < 0)
        return NULL;
    if (tfvm_program_entry_count(self->prog) == 0)
        return raise_msg(TFVM_ERR_ARGUMENT, "the program has no entry");
    tfvm_entry_info e;
    tfvm_program_entry(self->prog, 0, &e);
    if (e.n_params > MAX_VALUES || e.n_results > MAX_VALUES)
        return raise_msg(TFVM_ERR_ARGUMENT, "entry '%s': more than %d parameters or results", e.name, MAX_VALUES);
    /* which results, in the order asked for */
    size_t pick[MAX_VALUES], n_pick = 0;
    PyObject *seq = names == Py_None ? NULL : PySequence_Fast(names, "output_names must be a list of str");
    if (names != Py_None && !seq)
        return NULL;
    if (!seq || PySequence_Fast_GET_SIZE(seq) == 0) { /* None or empty: every output, as ORT */
        Py_XDECREF(seq);
        for (size_t i = 0; i < e.n_results; i++)
            pick[n_pick++] = i;
    } else {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
        for (Py_ssize_t k = 0; k < n; k++) {
            const char *s = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(seq, k));
            size_t i = 0;
            while (s && i < e.n_results && strcmp(e.results[i].name ? e.results[i].name : "", s) != 0)
                i++;
            if (!s || i == e.n_results || n_pick == MAX_VALUES) {
                if (s)
                    raise_msg(TFVM_ERR_ARGUMENT, "the model has no output named '%s'", s);
                Py_DECREF(seq);
                return NULL;
            }
            pick[n_pick++] = i;
        }
        Py_DECREF(seq);
    }
    tfvm_value vals[MAX_VALUES], res[MAX_VALUES];
    size_t i, fed = 0;
    for (i = 0; i < e.n_params; i++) {
        PyObject *v = e.params[i].name ? PyDict_GetItemString(feed, e.params[i].name) : NULL;
        fed += v != NULL;
        if (!v && e.params[i].has_default) { /* an overridable initializer not fed: its value */
            vals[i] = tfvm_default();
            continue;
        }
        if (!v) {
            raise_msg(TFVM_ERR_ARGUMENT, "input '%s' is missing from the feed", e.params[i].name ? e.params[i].name : "");
            release_values(vals, i);
            return NULL;
        }
        if (to_value(v, &e.params[i], &vals[i]) < 0) {
            release_values(vals, i);
            return NULL;
        }
    }
    if ((size_t)PyDict_GET_SIZE(feed) > fed) { /* a name that is no input's */
        PyObject *k, *v;
        Py_ssize_t pos = 0;
        while (PyDict_Next(feed, &pos, &k, &v)) {
            const char *s = PyUnicode_Check(k) ? PyUnicode_AsUTF8(k) : NULL;
            size_t j = 0;
            while (s && j < e.n_params && strcmp(e.params[j].name ? e.params[j].name : "", s) != 0)
                j++;
            if (j == e.n_params) {
                raise_msg(TFVM_ERR_ARGUMENT, "the model has no input named '%s'", s ? s : "?");
                release_values(vals, e.n_params);
                return NULL;
            }
        }
    }
    int rc = run_values(self, 0, &e, vals, res, threads, device);
    PyObject *out = NULL;
    if (rc == 0) {
        out = PyList_New((Py_ssize_t)n_pick);
        PyObject *made[MAX_VALUES] = {NULL};
        for (size_t k = 0; out && k < n_pick; k++) {
            size_t r = pick[k];
            if (!made[r]) {
                made[r] = from_value(&res[r], true, vals, e.n_params);
                if (!made[r]) {
                    Py_CLEAR(out);
                    break;
                }
            }
            PyList_SET_ITEM(out, (Py_ssize_t)k, Py_NewRef(made[r]));
        }
        for (size_t r = 0; r < e.n_results; r++) {
            Py_XDECREF(made[r]);
            tfvm_value_release(&res[r]); /* those not asked for (or already taken: no-op) */
        }
    }
    release_values(vals, e.n_params);
    return out;
}

/* ---- Session ------------------------------------------------------------------- */
typedef struct {
    PyObject_HEAD
    ProgramObject *program; /* owns the VM's program */
    tfvm_session *s;
    tfvm_vm *vm;
    int threads, device;
    size_t n_results;
    /* feeds and fetches in flight on other threads; finish/cancel wait for them */
    pthread_mutex_t lock;
    pthread_cond_t idle;
    int inflight;
} SessionObject;

static PyTypeObject SessionType;

/* Ends the session (cancel when results is NULL), gives the VM back. */
static tfvm_status session_end(SessionObject *self, tfvm_value *results, tfvm_error *err)
{
    tfvm_status st = TFVM_OK;
    tfvm_session *s = self->s;
    self->s = NULL;
    if (!results)
        tfvm_interrupt(self->vm); /* wakes a fetch blocked on another thread */
    bool armed = results ? sigint_arm(self->vm) : false;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&self->lock);
    while (self->inflight > 0)
        pthread_cond_wait(&self->idle, &self->lock);
    pthread_mutex_unlock(&self->lock);
    if (results)
        st = tfvm_session_finish(s, results, self->n_results);
    else
        tfvm_session_cancel(s);
    Py_END_ALLOW_THREADS
    sigint_disarm(armed);
    if (st != TFVM_OK && err)
        *err = *tfvm_last_error(self->vm);
    give_vm(self->program, self->vm, self->threads, self->device);
    self->vm = NULL;
    return st;
}

static void session_dealloc(SessionObject *self)
{
    if (self->s)
        session_end(self, NULL, NULL);
    pthread_mutex_destroy(&self->lock);
    pthread_cond_destroy(&self->idle);
    Py_XDECREF(self->program);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* _session(entry, args, kwargs, threads, device) -> Session */
static PyObject *program_session(ProgramObject *self, PyObject *args)
{
    PyObject *entry, *pos, *kw, *dev;
    int threads;
    if (!PyArg_ParseTuple(args, "OO!OiO", &entry, &PyTuple_Type, &pos, &kw, &threads, &dev))
        return NULL;
    drain_deferred();
    int device;
    if (parse_device(dev, &device) < 0)
        return NULL;
    int ei = entry_index(self, entry);
    if (ei < 0)
        return PyErr_Occurred() ? NULL : raise_msg(TFVM_ERR_ARGUMENT, "the program has no entry");
    tfvm_entry_info e;
    tfvm_program_entry(self->prog, (size_t)ei, &e);
    if (e.n_params > MAX_VALUES || e.n_results > MAX_VALUES)
        return raise_msg(TFVM_ERR_ARGUMENT, "entry '%s': more than %d parameters or results", e.name, MAX_VALUES);
    tfvm_value vals[MAX_VALUES];
    if (collect_args(&e, pos, kw == Py_None ? NULL : kw, vals) < 0)
        return NULL;
    tfvm_vm *vm = take_vm(self, threads, device);
    if (!vm) {
        release_values(vals, e.n_params);
        return NULL;
    }
    tfvm_session *s = NULL;
    tfvm_status st;
    Py_BEGIN_ALLOW_THREADS
    st = tfvm_session_start(vm, e.name, vals, e.n_params, &s);
    Py_END_ALLOW_THREADS
    release_values(vals, e.n_params); /* the session holds its own references */
    if (st != TFVM_OK) {
        tfvm_error err = *tfvm_last_error(vm);
        give_vm(self, vm, threads, device);
        return raise_err(st, &err);
    }
    SessionObject *o = PyObject_New(SessionObject, &SessionType);
    if (!o) {
        tfvm_session_cancel(s);
        give_vm(self, vm, threads, device);
        return NULL;
    }
    o->program = (ProgramObject *)Py_NewRef(self);
    o->s = s;
    o->vm = vm;
    o->threads = threads;
    o->device = device;
    o->n_results = e.n_results;
    pthread_mutex_init(&o->lock, NULL);
    pthread_cond_init(&o->idle, NULL);
    o->inflight = 0;
    return (PyObject *)o;
}

static int session_check(SessionObject *self)
{
    if (!self->s) {
        raise_msg(TFVM_ERR_ARGUMENT, "the session has ended");
        return -1;
    }
    return 0;
}

static void inflight_add(SessionObject *self, int d)
{
    pthread_mutex_lock(&self->lock);
    self->inflight += d;
    if (self->inflight == 0)
        pthread_cond_broadcast(&self->idle);
    pthread_mutex_unlock(&self->lock);
}

static PyObject *session_error(SessionObject *self, tfvm_status st)
{
    return raise_msg(st, "%s", tfvm_session_errmsg(self->s));
}

static PyObject *session_feed(SessionObject *self, PyObject *args)
{
    const char *name;
    PyObject *v;
    if (!PyArg_ParseTuple(args, "sO", &name, &v))
        return NULL;
    drain_deferred();
    if (session_check(self) < 0)
        return NULL;
    tfvm_value val;
    if (to_value(v, NULL, &val) < 0)
        return NULL;
    tfvm_status st = tfvm_feed(self->s, name, &val); /* never blocks; takes its own reference */
    tfvm_value_release(&val);
    if (st != TFVM_OK)
        return session_error(self, st);
    Py_RETURN_NONE;
}

static PyObject *session_fetch(SessionObject *self, PyObject *args)
{
    const char *name;
    if (!PyArg_ParseTuple(args, "s", &name))
        return NULL;
    drain_deferred();
    if (session_check(self) < 0)
        return NULL;
    tfvm_value out;
    memset(&out, 0, sizeof out);
    tfvm_status st;
    tfvm_session *s = self->s;
    inflight_add(self, 1);
    bool armed = sigint_arm(self->vm);
    Py_BEGIN_ALLOW_THREADS
    st = tfvm_fetch(s, name, &out);
    Py_END_ALLOW_THREADS
    sigint_disarm(armed);
    if (st != TFVM_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", tfvm_session_errmsg(s));
        inflight_add(self, -1);
        if (check_signals(st) < 0)
            return NULL;
        return raise_msg(st, "%s", msg);
    }
    inflight_add(self, -1);
    return from_value(&out, false, NULL, 0);
}

static PyObject *session_finish(SessionObject *self, PyObject *unused)
{
    (void)unused;
    drain_deferred();
    if (session_check(self) < 0)
        return NULL;
    tfvm_value res[MAX_VALUES];
    tfvm_error err;
    memset(&err, 0, sizeof err);
    tfvm_status st = session_end(self, res, &err);
    if (st != TFVM_OK) {
        if (check_signals(st) < 0)
            return NULL;
        return raise_err(st, &err);
    }
    PyObject *out = PyTuple_New((Py_ssize_t)self->n_results);
    for (size_t i = 0; i < self->n_results; i++) {
        PyObject *r = out ? from_value(&res[i], false, NULL, 0) : NULL;
        if (!r) {
            Py_CLEAR(out);
            release_values(res + i, self->n_results - i);
            break;
        }
        PyTuple_SET_ITEM(out, (Py_ssize_t)i, r);
    }
    return out;
}

static PyObject *session_cancel(SessionObject *self, PyObject *unused)
{
    (void)unused;
    if (self->s)
        session_end(self, NULL, NULL);
    Py_RETURN_NONE;
}

static PyObject *session_active(SessionObject *self, void *unused)
{
    (void)unused;
    return PyBool_FromLong(self->s != NULL);
}

static PyMethodDef session_methods[] = {
    {"feed", (PyCFunction)session_feed, METH_VARARGS, "feed(name, value): queue value on channel name; never blocks."},
    {"fetch", (PyCFunction)session_fetch, METH_VARARGS, "fetch(name): the channel's next value (blocks, GIL released)."},
    {"finish", (PyCFunction)session_finish, METH_NOARGS, "finish(): no more feeds; wait for the run; its results."},
    {"cancel", (PyCFunction)session_cancel, METH_NOARGS, "cancel(): stop the run and end the session."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef session_getset[] = {
    {"active", (getter)session_active, NULL, "whether the session has not ended", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject SessionType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tfvm._tfvm.Session",
    .tp_basicsize = sizeof(SessionObject),
    .tp_dealloc = (destructor)session_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A run of an entry that the host feeds and fetches while it runs.",
    .tp_methods = session_methods,
    .tp_getset = session_getset,
};

static PyMethodDef program_methods[] = {
    {"entries", (PyCFunction)program_entries, METH_NOARGS, "The entry points and their signatures."},
    {"save", (PyCFunction)program_save, METH_VARARGS, "save(path=None): .tfvm bytes, or write them to path."},
    {"dis", (PyCFunction)program_dis, METH_NOARGS, "The instructions, as `tfvm dis` prints them."},
    {"run", (PyCFunction)program_run, METH_VARARGS, "run(entry, args, kwargs, threads, device)"},
    {"run_feed", (PyCFunction)program_run_feed, METH_VARARGS, "run_feed(output_names, feed, threads, device)"},
    {"session", (PyCFunction)program_session, METH_VARARGS, "session(entry, args, kwargs, threads, device)"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ProgramType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tfvm._tfvm.Program",
    .tp_basicsize = sizeof(ProgramObject),
    .tp_dealloc = (destructor)program_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A loaded, verified tfvm program.",
    .tp_methods = program_methods,
};

/* ---- Making programs ------------------------------------------------------------- */

static const char *const format_names[] = {"auto", "tfvm", "tfasm", "tfg", "onnx", "pb", NULL};

static int parse_format(const char *s, tfvm_format *out)
{
    for (int i = 0; format_names[i]; i++) {
        if (strcmp(s, format_names[i]) == 0) {
            *out = (tfvm_format)i;
            return 0;
        }
    }
    raise_msg(TFVM_ERR_ARGUMENT, "unknown format '%s' (auto, tfvm, tfasm, tfg, onnx or pb)", s);
    return -1;
}

/* open(path, format, entry, outputs, opt_level, overflow_trap) -> Program */
static PyObject *mod_open(PyObject *mod, PyObject *args)
{
    (void)mod;
    PyObject *fs;
    const char *format, *entry, *outputs;
    int opt_level, trap;
    if (!PyArg_ParseTuple(args, "O&szzip", PyUnicode_FSConverter, &fs, &format, &entry, &outputs, &opt_level, &trap))
        return NULL;
    tfvm_open_options opts;
    tfvm_open_options_init(&opts);
    if (parse_format(format, &opts.format) < 0) {
        Py_DECREF(fs);
        return NULL;
    }
    opts.entry = entry;
    opts.outputs = outputs;
    opts.opt_level = opt_level;
    opts.overflow_trap = trap;
    tfvm_program *p = NULL;
    tfvm_error err;
    tfvm_status st;
    Py_BEGIN_ALLOW_THREADS
    st = tfvm_program_open(PyBytes_AS_STRING(fs), &opts, NULL, &p, &err);
    Py_END_ALLOW_THREADS
    Py_DECREF(fs);
    if (st != TFVM_OK)
        return raise_err(st, &err);
    return new_program(p);
}

/* from_memory(data, name, format, entry, outputs, opt_level, overflow_trap) ->
 * Program. format "auto": .tfvm bytes by their magic, else an ONNX model. */
static PyObject *mod_from_memory(PyObject *mod, PyObject *args)
{
    (void)mod;
    Py_buffer buf;
    const char *name, *format, *entry, *outputs;
    int opt_level, trap;
    if (!PyArg_ParseTuple(args, "y*sszzip", &buf, &name, &format, &entry, &outputs, &opt_level, &trap))
        return NULL;
    tfvm_format f;
    if (parse_format(format, &f) < 0) {
        PyBuffer_Release(&buf);
        return NULL;
    }
    if (f == TFVM_FORMAT_AUTO)
        f = buf.len >= 4 && memcmp(buf.buf, "TFVM", 4) == 0 ? TFVM_FORMAT_TFVM : TFVM_FORMAT_ONNX;
    tfvm_program *p = NULL;
    tfvm_error err;
    memset(&err, 0, sizeof err);
    tfvm_status st = TFVM_OK;
    tfvm_compile_options co;
    tfvm_compile_options_init(&co);
    co.entry = entry;
    co.opt_level = opt_level;
    co.overflow_trap = trap;
    Py_BEGIN_ALLOW_THREADS
    switch (f) {
    case TFVM_FORMAT_TFVM: st = tfvm_program_load_memory(buf.buf, (size_t)buf.len, name, NULL, &p, &err); break;
    case TFVM_FORMAT_TFASM: st = tfvm_program_assemble(buf.buf, (size_t)buf.len, name, NULL, &p, &err); break;
    case TFVM_FORMAT_TFG: st = tfvm_program_compile(buf.buf, (size_t)buf.len, name, &co, NULL, &p, &err); break;
    case TFVM_FORMAT_ONNX: st = tfvm_program_import_onnx(buf.buf, (size_t)buf.len, name, NULL, NULL, &p, &err); break;
    case TFVM_FORMAT_TF: st = tfvm_program_import_tf(buf.buf, (size_t)buf.len, name, outputs, NULL, &p, &err); break;
    default: break;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&buf);
    if (st != TFVM_OK)
        return raise_err(st, &err);
    return new_program(p);
}

static PyObject *mod_device_status(PyObject *mod, PyObject *args)
{
    (void)mod;
    const char *name;
    if (!PyArg_ParseTuple(args, "s", &name))
        return NULL;
    char buf[256];
    tfvm_status st;
    Py_BEGIN_ALLOW_THREADS
    st = tfvm_device_status(name, buf, sizeof buf);
    Py_END_ALLOW_THREADS
    if (st == TFVM_ERR_ARGUMENT)
        return raise_msg(st, "unknown device '%s'", name);
    return Py_BuildValue("(Os)", st == TFVM_OK ? Py_True : Py_False, buf);
}

static PyObject *mod_init(PyObject *mod, PyObject *args)
{
    (void)mod;
    PyObject *classes;
    unsigned long ident;
    if (!PyArg_ParseTuple(args, "O!k", &PyTuple_Type, &classes, &ident))
        return NULL;
    if (PyTuple_GET_SIZE(classes) != N_STATUS) {
        PyErr_Format(PyExc_ValueError, "need %d error classes", N_STATUS);
        return NULL;
    }
    for (int i = 0; i < N_STATUS; i++) {
        Py_XSETREF(err_class[i], Py_NewRef(PyTuple_GET_ITEM(classes, i)));
    }
    main_ident = ident;
    Py_RETURN_NONE;
}

static PyObject *mod_status_names(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    PyObject *t = PyTuple_New(N_STATUS);
    for (int i = 0; t && i < N_STATUS; i++)
        PyTuple_SET_ITEM(t, i, PyUnicode_FromString(tfvm_status_name((tfvm_status)i)));
    return t;
}

static PyObject *mod_dtype_size(PyObject *mod, PyObject *args)
{
    (void)mod;
    const char *s;
    if (!PyArg_ParseTuple(args, "s", &s))
        return NULL;
    tfvm_dtype d = dtype_by_name(s);
    return PyLong_FromSize_t(d ? tfvm_dtype_size(d) : 0);
}

static PyMethodDef mod_methods[] = {
    {"init", mod_init, METH_VARARGS, NULL},
    {"open", mod_open, METH_VARARGS, NULL},
    {"from_memory", mod_from_memory, METH_VARARGS, NULL},
    {"device_status", mod_device_status, METH_VARARGS, NULL},
    {"status_names", mod_status_names, METH_NOARGS, NULL},
    {"dtype_size", mod_dtype_size, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moddef = {
    PyModuleDef_HEAD_INIT, .m_name = "tfvm._tfvm", .m_doc = "tfvm's C API for Python (use the tfvm package).",
    .m_size = -1, .m_methods = mod_methods,
};

PyMODINIT_FUNC PyInit__tfvm(void)
{
    import_array();
    if (PyType_Ready(&ProgramType) < 0 || PyType_Ready(&SessionType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&moddef);
    if (!m)
        return NULL;
    if (PyModule_AddStringConstant(m, "version", tfvm_version()) < 0 ||
        PyModule_AddObjectRef(m, "Program", (PyObject *)&ProgramType) < 0 ||
        PyModule_AddObjectRef(m, "Session", (PyObject *)&SessionType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
