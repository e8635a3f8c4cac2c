/* compiler/build.c — the structured IR made by other front ends
 * (compiler/build.h): functions without source, constants, ops, Ifs, Whiles
 * and calls, then the compiler's own back half (cc_finish). */
#include <string.h>

#include "build.h"

cc_vtype cc_scalar_t(tfvm_dtype d) { return (cc_vtype){.dtype = (uint8_t)d}; }

cc_vtype cc_tensor_t(tfvm_dtype d, int rank)
{
    cc_vtype t = {.dtype = (uint8_t)d, .tensor = 1, .rank = rank < 0 ? ISA_RANK_ANY : (uint8_t)rank};
    for (int k = 0; k < TFVM_MAX_RANK; k++)
        t.dims[k] = -1;
    return t;
}

static cc_blk *new_blk(cc *C, cc_ifn *fn, cc_blk *parent, cc_node *owner, cc_role role)
{
    cc_blk *b = cc_alloc(C, sizeof *b);
    b->parent = parent;
    b->owner = owner;
    b->role = (uint8_t)role;
    b->fn = fn;
    b->depth = parent ? parent->depth + 1 : 0;
    return b;
}

static const char *dup(cc *C, const char *s) { return s ? cc_strndup(C, s, strlen(s)) : NULL; }

cc_ifn *cc_func_new(cc *C, const char *name, uint32_t n_params, const char *const *pnames, const cc_vtype *ptypes,
                    uint32_t n_results, const char *const *rnames, const cc_vtype *rtypes)
{
    cc_func *f = cc_alloc(C, sizeof *f);
    f->name = dup(C, name);
    f->n_params = n_params;
    f->n_results = n_results;
    f->params = cc_array(C, n_params + 1, sizeof *f->params);
    f->results = cc_array(C, n_results + 1, sizeof *f->results);
    f->index = C->n_ifns;
    f->reachable = true;
    for (uint32_t k = 0; k < n_params; k++)
        f->params[k] = (cc_param){.name = dup(C, pnames[k]), .type = ptypes[k]};
    for (uint32_t k = 0; k < n_results; k++)
        f->results[k] = (cc_param){.name = rnames ? dup(C, rnames[k]) : NULL, .type = rtypes[k]};

    cc_ifn *fn = cc_alloc(C, sizeof *fn);
    fn->src = f;
    fn->name = f->name;
    fn->n_params = n_params;
    fn->n_results = n_results;
    fn->params = cc_array(C, n_params + 1, sizeof(cc_node *));
    fn->param_live = cc_array(C, n_params + 1, sizeof(bool));
    f->ir = fn;
    fn->top = new_blk(C, fn, NULL, NULL, CC_B_TOP);
    for (uint32_t k = 0; k < n_params; k++) {
        cc_node *p = cc_node_new(C, fn->top, CC_N_PARAM, 0, 1, (cc_pos){0, 0});
        p->u.index = k;
        p->types[0] = ptypes[k];
        p->names[0] = f->params[k].name;
        fn->params[k] = p;
    }
    C->ifns = cc_grow(C, C->ifns, C->n_ifns, &C->funcs_cap, sizeof *C->ifns);
    C->ifns[C->n_ifns++] = fn;
    return fn;
}

cc_blk *cc_fn_top(cc_ifn *fn) { return fn->top; }
cc_irval cc_param_val(cc_ifn *fn, uint32_t k) { return (cc_irval){fn->params[k], 0}; }
cc_irval cc_out(cc_node *n, uint32_t k) { return (cc_irval){n, k}; }
cc_irval cc_lvar(cc_node *loop, uint32_t k) { return (cc_irval){loop->u.loop.lvars[k], 0}; }

void cc_block_results(cc *C, cc_blk *b, uint32_t n, const cc_irval *v)
{
    b->n_res = n;
    b->res = cc_array(C, n, sizeof *b->res);
    if (n)
        memcpy(b->res, v, n * sizeof *v);
}

cc_irval cc_const_new(cc *C, cc_blk *b, tfvm_dtype dtype, int rank, const int64_t *dims, const void *data,
                      size_t nbytes, bool borrow)
{
    cc_node *n = cc_node_new(C, b, CC_N_CONST, 0, 1, (cc_pos){0, 0});
    cc_vtype t = rank ? cc_tensor_t(dtype, rank) : cc_scalar_t(dtype);
    if (rank)
        memcpy(t.dims, dims, (size_t)rank * sizeof *dims);
    n->types[0] = t;
    n->u.c.dtype = (uint8_t)dtype;
    n->u.c.rank = (uint8_t)rank;
    if (rank)
        memcpy(n->u.c.dims, dims, (size_t)rank * sizeof *dims);
    n->u.c.nbytes = nbytes;
    if (borrow) {
        n->u.c.data = data;
    } else {
        void *p = cc_alloc(C, nbytes ? nbytes : 1);
        if (nbytes)
            memcpy(p, data, nbytes);
        n->u.c.data = p;
    }
    return (cc_irval){n, 0};
}

cc_irval cc_const_scalar(cc *C, cc_blk *b, tfvm_dtype dtype, double f, int64_t i)
{
    unsigned char bytes[8] = {0};
    switch (dtype) {
    case TFVM_BOOL: bytes[0] = (f != 0 || i != 0); break;
    case TFVM_I32: { int32_t v = (int32_t)i; memcpy(bytes, &v, 4); break; }
    case TFVM_I64: memcpy(bytes, &i, 8); break;
    case TFVM_F32: { float v = (float)f; memcpy(bytes, &v, 4); break; }
    case TFVM_F64: memcpy(bytes, &f, 8); break;
    default: memcpy(bytes, &i, tfvm_dtype_size(dtype) ? tfvm_dtype_size(dtype) : 1); break;
    }
    return cc_const_new(C, b, dtype, 0, NULL, bytes, tfvm_dtype_size(dtype), false);
}

cc_irval cc_const_i64s(cc *C, cc_blk *b, uint32_t n, const int64_t *v)
{
    int64_t dims[1] = {n};
    return cc_const_new(C, b, TFVM_I64, 1, dims, v, n * sizeof *v, false);
}

cc_irval cc_op_new(cc *C, cc_blk *b, isa_op op, uint32_t attr, uint32_t n_in, const cc_irval *in, cc_vtype type,
                   const char *name)
{
    cc_node *n = cc_node_new(C, b, CC_N_OP, n_in, 1, (cc_pos){0, 0});
    n->op = (uint16_t)op;
    n->attr = attr;
    if (n_in)
        memcpy(n->in, in, n_in * sizeof *in);
    n->types[0] = type;
    n->names[0] = dup(C, name);
    return (cc_irval){n, 0};
}

void cc_set_origin(cc *C, const char *node, const char *op)
{
    if (!node) {
        C->origin = NULL;
        return;
    }
    cc_origin *o = cc_alloc(C, sizeof *o);
    o->node = cc_strndup(C, node, strlen(node));
    o->op = op ? cc_strndup(C, op, strlen(op)) : NULL;
    C->origin = o;
}

cc_node *cc_if_new(cc *C, cc_blk *b, cc_irval cond, uint32_t n_out, const cc_vtype *types, const char *const *names)
{
    cc_node *n = cc_node_new(C, b, CC_N_IF, 1, n_out, (cc_pos){0, 0});
    n->in[0] = cond;
    n->u.cond.then = new_blk(C, b->fn, b, n, CC_B_THEN);
    n->u.cond.els = new_blk(C, b->fn, b, n, CC_B_ELSE);
    for (uint32_t k = 0; k < n_out; k++) {
        n->types[k] = types[k];
        n->names[k] = names ? dup(C, names[k]) : NULL;
    }
    return n;
}

cc_node *cc_while_new(cc *C, cc_blk *b, uint32_t n_vars, const cc_irval *init, const cc_vtype *types,
                      const char *const *names, const char *label)
{
    cc_node *n = cc_node_new(C, b, CC_N_WHILE, n_vars, n_vars, (cc_pos){0, 0});
    if (n_vars)
        memcpy(n->in, init, n_vars * sizeof *init);
    n->u.loop.label = dup(C, label);
    cc_blk *head = n->u.loop.head = new_blk(C, b->fn, b, n, CC_B_HEAD);
    n->u.loop.lvars = cc_array(C, n_vars, sizeof(cc_node *));
    for (uint32_t k = 0; k < n_vars; k++) {
        cc_node *l = cc_node_new(C, head, CC_N_LVAR, 0, 1, (cc_pos){0, 0});
        l->u.index = k;
        l->owner = n;
        l->types[0] = types[k];
        l->names[0] = dup(C, names[k]);
        n->u.loop.lvars[k] = l;
        n->types[k] = types[k];
        n->names[k] = l->names[0];
    }
    n->u.loop.body = new_blk(C, b->fn, head, n, CC_B_BODY);
    return n;
}

cc_node *cc_call_new(cc *C, cc_blk *b, cc_ifn *fn, const cc_irval *args)
{
    cc_node *n = cc_node_new(C, b, CC_N_CALL, fn->n_params, fn->n_results, (cc_pos){0, 0});
    if (fn->n_params)
        memcpy(n->in, args, fn->n_params * sizeof *args);
    n->u.call.callee = fn;
    n->u.call.site = C->mod.n_sites++;
    fn->src->called = true;
    for (uint32_t k = 0; k < fn->n_results; k++)
        n->types[k] = fn->src->results[k].type;
    return n;
}

static void build_guarded(cc *C, cc_build_fn fn, void *ud, isa_program *out)
{
    jmp_buf jb;
    C->jb = &jb;
    if (setjmp(jb) == 0) {
        cc_ifn *entry = fn(C, ud);
        /* the entry first (cc_lower's order) */
        for (uint32_t i = 0; i < C->n_ifns; i++)
            if (C->ifns[i] == entry) {
                memmove(C->ifns + 1, C->ifns, i * sizeof *C->ifns);
                C->ifns[0] = entry;
                break;
            }
        C->entry_ifn = entry;
        C->entry_wrapped = entry->src->called;
        cc_finish(C, out);
    }
    C->jb = NULL;
}

tfvm_status cc_build_program(const char *name, const tfvm_allocator *a, int opt_level, cc_build_fn fn, void *ud,
                             isa_program *out, tfvm_error *err)
{
    isa_program_init(out, a);
    ut_err_clear(err);
    cc C;
    cc_init(&C, NULL, 0, name, &out->alloc, err);
    C.opt = opt_level;
    build_guarded(&C, fn, ud, out);
    tfvm_status st = C.status;
    ut_arena_free(&C.ar);
    if (st != TFVM_OK)
        isa_program_release(out);
    return st;
}
