/* compiler/compiler.h — the .tfg graph compiler (docs/language.md): lexer,
 * parser, type checker, structured graph IR, optimizations, and the lowering
 * of if/while/calls to ISA instructions, emitted as a verified isa_program. */
#ifndef TFVM_COMPILER_H
#define TFVM_COMPILER_H

#include <setjmp.h>

#include "isa/isa.h"

/* Compiles .tfg source into a verified program. `name` prefixes messages
 * ("fib.tfg:3:12: ..."); `entry` is the function that becomes the entry point
 * (NULL = "main"); opt_level 0 disables every optimization (-O0), 1 enables
 * all of them. On failure *out is released and err->message holds
 * "NAME:LINE:COL: message", then the source line and a caret line (see
 * docs/language.md, "Errors"); code TFVM_ERR_SYNTAX for syntax errors,
 * TFVM_ERR_TYPE for type and name errors, TFVM_ERR_NOMEM when memory runs out. */
typedef struct cc_options {
    const char *entry;    /* NULL = "main" */
    int opt_level;
    bool overflow_trap;   /* --overflow=trap */
    /* warnings ("fib.tfg:3:9: warning: unused variable 'x'"), one call each,
     * only when the compile succeeds; NULL = dropped */
    void (*warn)(void *ud, const char *message);
    void *warn_ud;
} cc_options;
tfvm_status cc_compile(const char *src, size_t len, const char *name, const cc_options *o,
                       const tfvm_allocator *a, isa_program *out, tfvm_error *err);
/* tfvm_program_compile, with the load-time check (an_program_finish) only
 * when `check` (compiler/api.c; front/open.c's files come here). */
tfvm_status cc_program(const char *src, size_t len, const char *name, const tfvm_compile_options *opts, bool check,
                       const tfvm_config *cfg, tfvm_program **out, tfvm_error *err);

/* The front end alone, for tools and tests that walk the typed AST (the
 * reference evaluator of test/unit/test_diff.c): lexes, parses and checks
 * into *C, whose module stays valid until cc_release(C). Errors as for
 * cc_compile. */
typedef struct cc cc;
tfvm_status cc_front(cc *C, const char *src, size_t len, const char *name, const char *entry,
                     const tfvm_allocator *a, tfvm_error *err);
void cc_release(cc *C);

/* ---- Shared by the compiler's files ------------------------------------------ */

typedef struct cc_pos {
    uint32_t line, col; /* 1-based; 0 = none */
} cc_pos;

/* Tokens */
typedef enum cc_tk {
    CC_T_EOF, CC_T_IDENT, CC_T_INT, CC_T_FLOAT,
    /* keywords */
    CC_T_FN, CC_T_LET, CC_T_IF, CC_T_ELSE, CC_T_WHILE, CC_T_TRUE, CC_T_FALSE,
    CC_T_VAR, CC_T_FOR, CC_T_IN, CC_T_RETURN, CC_T_CONST,
    /* punctuation */
    CC_T_LPAREN, CC_T_RPAREN, CC_T_LBRACE, CC_T_RBRACE, CC_T_LBRACK, CC_T_RBRACK,
    CC_T_COMMA, CC_T_SEMI, CC_T_COLON, CC_T_ASSIGN, CC_T_ARROW, CC_T_QUESTION,
    CC_T_PLUS, CC_T_MINUS, CC_T_STAR, CC_T_SLASH, CC_T_PERCENT,
    CC_T_LT, CC_T_LE, CC_T_GT, CC_T_GE, CC_T_EQ, CC_T_NE, CC_T_AND, CC_T_OR, CC_T_NOT,
    /* bitwise; compound assignment; ranges; strings (load("w.npy")) */
    CC_T_BAND, CC_T_BOR, CC_T_XOR, CC_T_SHL, CC_T_SHR, CC_T_TILDE,
    CC_T_PLUS_EQ, CC_T_MINUS_EQ, CC_T_STAR_EQ, CC_T_SLASH_EQ, CC_T_PERCENT_EQ,
    CC_T_BAND_EQ, CC_T_BOR_EQ, CC_T_XOR_EQ, CC_T_SHL_EQ, CC_T_SHR_EQ, CC_T_DOTDOT, CC_T_STRING,
    /* loop control */
    CC_T_BREAK, CC_T_CONTINUE,
    CC_T_COUNT
} cc_tk;

typedef struct cc_tok {
    uint8_t kind;      /* cc_tk */
    uint8_t suffix;    /* INT/FLOAT: tfvm_dtype of a suffix (1i64, 2.5f32), 0 = none */
    cc_pos pos;
    const char *text;  /* into the source */
    uint32_t len;
    uint32_t depth;    /* '{' open before it (a '}' counts as closed): error recovery */
    uint64_t ival;     /* INT: magnitude (saturates; `big` says it overflowed) */
    double fval;       /* FLOAT */
    bool big;          /* INT literal above 2^64 - 1 */
} cc_tok;

/* Types. A value type is a scalar (rank 0, not tensor) or a tensor with a
 * dtype and rank dims (-1 = unknown, written `?`). Expressions have a list
 * of value types: one for an ordinary value, several for a tuple. */
typedef struct cc_vtype {
    uint8_t dtype;     /* tfvm_dtype */
    uint8_t tensor;    /* 0 = scalar */
    uint8_t rank;
    int64_t dims[TFVM_MAX_RANK];
} cc_vtype;

typedef struct cc_tlist {
    uint32_t n;
    cc_vtype *t;
} cc_tlist;

/* A named value: a parameter, a let binding or a loop variable. `slot` is
 * its index in its function's frame (used by the reference evaluator). */
typedef struct cc_var {
    const char *name;
    cc_pos pos;
    cc_vtype type;
    uint32_t slot;
    uint32_t uses;
    uint8_t flex;         /* loop variable initialised by a bare literal: 1 integer,
                             2 float; its dtype is fixed by its first typed use */
    bool fixed;           /* flex var whose dtype a use just fixed */
    struct cc_var *flexsrc;/* flex: the variable a fix settles (the let's or loop's variable
                             that this is a version of; itself, or NULL) */
    cc_pos fixed_at;      /* the use that fixed its dtype (messages), line 0 = none */
    bool poison;          /* its declaration failed to check: uses are quiet errors */
    struct cc_var *origin;/* the declaration this is a version of (var x; x = ...; loop copies) */
    uint32_t user_uses;   /* uses written by the user (origin's count) */
    struct cc_let *let;   /* the let that declared it (flex lets, warnings), or NULL */
    struct cc_irval *ir;  /* IR building: its current value */
} cc_var;

/* ---- AST --------------------------------------------------------------------- */
typedef enum cc_ek {
    CC_E_INT, CC_E_FLOAT, CC_E_BOOL, CC_E_TENSOR, CC_E_VAR, CC_E_UNARY, CC_E_BINARY,
    CC_E_CALL, CC_E_IF, CC_E_WHILE, CC_E_TUPLE
} cc_ek;

typedef struct cc_expr cc_expr;
typedef struct cc_func cc_func;

/* feed<T>("x") and fetch("y", v) (docs/coexec.md): the channel's name as
 * written, and (feed) the declared type; `chan` is its index in the
 * program's channel table (cc.chans) once the checker has seen it. */
typedef struct cc_host {
    const char *name;
    cc_pos name_pos;
    bool feed;
    bool has_type;        /* feed<T>: the type argument was given */
    cc_vtype type;        /* feed: T */
    uint32_t chan;
} cc_host;

typedef struct cc_let {
    cc_pos pos;
    uint32_t n_names;     /* 1 for `let x = e`, k for `let (a, b) = e` */
    const char **names;   /* "_" = ignored */
    cc_pos *name_pos;
    bool has_type;        /* `let x: T = e` (single name only) */
    cc_vtype type;
    cc_pos type_pos;
    cc_expr *value;
    cc_var **vars;        /* per name, NULL for "_" */
    bool assign;          /* rebinds existing vars (x = e; the results of a statement if/loop):
                             each name keeps its var's type */
    bool synth;           /* made by the compiler (const bindings): never warned about */
    bool flexed;          /* has_type was set because a use fixed a bare literal's dtype */
    cc_pos fixed_at;      /* flexed: that use */
} cc_let;

typedef struct cc_ablock {
    cc_pos pos;
    uint32_t n_lets;
    cc_let *lets;
    cc_expr *result;
} cc_ablock;

typedef struct cc_loopvar {
    const char *name;
    cc_pos pos;
    bool has_type;
    cc_vtype type;
    cc_expr *init;
    bool assign;          /* a statement loop's copy of an outer var: keeps its type */
    cc_pos fixed_at;      /* a use fixed the dtype of its bare literal here (messages) */
    cc_var *var;          /* the variable inside the loop */
} cc_loopvar;

struct cc_expr {
    uint8_t kind;         /* cc_ek */
    cc_pos pos;           /* operators: the operator; others: where it starts */
    cc_pos start;         /* where the whole expression starts */
    cc_tlist type;        /* after type checking */
    union {
        struct {          /* INT: magnitude and sign; FLOAT; BOOL */
            uint64_t mag;
            bool neg, big;
            uint8_t suffix;
            double f;
            bool b;
        } lit;
        struct {          /* TENSOR literal: leaves in C order */
            uint8_t rank;
            int64_t dims[TFVM_MAX_RANK];
            uint32_t n;
            cc_expr **elems;
            const void *raw;    /* load("w.npy"): the data (then n == 0), dtype raw_dtype */
            size_t raw_bytes;
            uint8_t raw_dtype;
        } tensor;
        struct {
            const char *name;
            cc_var *var;
            bool synth;   /* made by the compiler: not a use for warnings */
        } var;
        struct {
            uint8_t op;   /* cc_tk of the operator */
            cc_expr *a, *b;
        } op;
        struct {
            const char *name;
            cc_pos name_pos;
            bool has_targ;     /* cast<f32>(x) */
            uint8_t targ;      /* tfvm_dtype */
            uint32_t n_args;
            cc_expr **args;
            const char **arg_names; /* per argument: its keyword (`axis = 1`) or NULL;
                                       NULL when every argument is positional */
            cc_pos *arg_pos;   /* per argument: where its keyword starts (with arg_names) */
            uint8_t n_index;   /* indexing x[i, :, j]: the number of index items;
                                  args = x then the non-':' items */
            uint8_t colons;    /* indexing: bit k set when item k is ':' */
            cc_func *fn;       /* a user function, or NULL for a built-in op */
            int builtin;       /* isa_op, when fn == NULL */
            uint32_t site;     /* user call: program-wide call-site id */
            /* Built-in ops after type checking (builtins.c): the instruction's
             * operands in port order (the arguments, or constants made from
             * literal arguments such as conv2d's stride) and attribute a. */
            uint32_t n_ops;
            cc_expr **ops;
            uint32_t attr;
            cc_expr *sugar;    /* indexing: the GATHER chain that computes it */
            int decomp;        /* a composite op (decomp.h) + 1, built by cc_decompose; else 0 */
            double dparams[2]; /* its parameters */
            cc_host *host;     /* feed<T>("x") (no arguments), fetch("y", v) (args[0] = v); else NULL */
        } call;
        struct {
            cc_expr *cond;
            cc_ablock *then, *els;
        } cond;
        struct {
            const char *label;  /* NULL = automatic name */
            cc_pos label_pos;
            const char *for_var; /* `for i in ...`: its counter, which the automatic name uses */
            uint32_t n_vars;
            cc_loopvar *vars;
            cc_expr *cond;
            cc_ablock *body;
            bool bare;          /* a statement loop that assigns no outer variable (n_vars = 0):
                                   only a loop that feeds or fetches can end */
        } loop;
        struct {
            uint32_t n;
            cc_expr **elems;
        } tuple;
    } u;
};

typedef struct cc_param {
    const char *name;     /* results: NULL = unnamed (r0, r1, ...) */
    cc_pos pos;
    cc_vtype type;
    cc_var *var;
    const char **dim_names; /* NULL, or type.rank names of symbolic dims (NULL = unnamed): the signature's */
    const struct cc_cval *dflt; /* an entry's parameter: NULL, or its default value (a run that leaves it out
                               takes this constant; ONNX: an initializer named like a graph input) */
} cc_param;

struct cc_func {
    const char *name;
    cc_pos pos;
    uint32_t n_params, n_results;
    cc_param *params, *results;
    cc_ablock *body;
    uint32_t n_slots;     /* frame size for the reference evaluator */
    uint32_t index;       /* in source order */
    bool reachable;       /* from the entry */
    bool called;          /* by some reachable function */
    bool mentioned;       /* called somewhere (unused-function warnings) */
    bool broken;          /* had a syntax error: not type checked (its errors would echo it) */
    uint64_t *chans;      /* the channels it feeds or fetches, itself or through calls: a bit
                             per channel (cc.chans), NULL when the program has none */
    struct cc_ifn *ir;
};

typedef struct cc_module {
    uint32_t n_funcs;
    cc_func **funcs;
    uint32_t n_sites;     /* textual call sites: ids 0 .. n_sites-1 */
    cc_func *entry;
} cc_module;

/* ---- Structured graph IR --------------------------------------------------------
 * A function is a tree of blocks; a block is a list of nodes in dataflow
 * order. A node may use values of its own block and of enclosing blocks of
 * the same function (lowering routes them: SWITCH into branches, ENTER into
 * loops). If and While nodes own blocks: If has `then` and `else` whose
 * results meet in its outputs; While has a header block (its loop variables
 * and the condition, result 0) and a body block inside the header (results =
 * the next values of the loop variables); its outputs are the final values
 * (cc_loop_exit: a header may also give, as results 1 + k, the value each
 * variable exits with). */
typedef enum cc_nk { CC_N_PARAM, CC_N_CONST, CC_N_OP, CC_N_CALL, CC_N_IF, CC_N_WHILE, CC_N_LVAR } cc_nk;
typedef enum cc_role { CC_B_TOP, CC_B_THEN, CC_B_ELSE, CC_B_HEAD, CC_B_BODY } cc_role;

typedef struct cc_node cc_node;
typedef struct cc_blk cc_blk;
typedef struct cc_ifn cc_ifn;

typedef struct cc_irval {
    cc_node *n;
    uint32_t k;           /* output index */
} cc_irval;

struct cc_blk {
    cc_blk *parent;
    cc_node *owner;       /* If/While node; NULL for the top block */
    uint8_t role;         /* cc_role */
    cc_node *first, *last;
    uint32_t n_res;
    cc_irval *res;
    cc_ifn *fn;
    uint32_t depth;       /* nesting depth (top = 0) */
    void *low;            /* lowering state */
};

typedef struct cc_cval {  /* a constant */
    uint8_t dtype, rank;
    int64_t dims[TFVM_MAX_RANK];
    size_t nbytes;
    const void *data;
} cc_cval;

/* The model's node an IR node was made for (an importer's ONNX or TF node:
 * its name and op type), kept as the instruction's origin (isa_inst). */
typedef struct cc_origin {
    const char *node;
    const char *op;
} cc_origin;

struct cc_node {
    uint8_t kind;         /* cc_nk */
    bool live;            /* DCE mark */
    uint16_t op;          /* OP: isa_op */
    uint32_t attr;        /* OP: attribute a (CAST dtype) */
    cc_blk *blk;
    cc_node *prev, *next;
    uint32_t n_in;
    cc_irval *in;
    uint32_t n_out;
    cc_vtype *types;      /* per output */
    cc_irval *fwd;        /* per output: replacement (fwd[k].n != NULL) */
    cc_pos pos;
    const char **names;   /* per output: debug name (a source name), or NULL */
    const cc_origin *origin; /* the model's node it came from (C->origin when made), or NULL */
    uint32_t id;          /* unique per compilation */
    union {
        uint32_t index;   /* PARAM, LVAR: position */
        cc_cval c;        /* CONST */
        struct { cc_ifn *callee; uint32_t site; } call;
        struct { cc_blk *then, *els; } cond;
        struct { cc_blk *head, *body; cc_node **lvars; const char *label; cc_pos label_pos;
                 const char *for_var; /* `for i in ...`: its counter */
                 uint32_t parallel; /* ENTER parallel=N of its variables; 0 = the default */ } loop;
    } u;
    cc_node *owner;       /* LVAR: its While */
    bool *olive;          /* If/While after DCE: per output (loop variable), used; NULL = all */
    void *low;            /* lowering: per-output references */
};

struct cc_ifn {
    cc_func *src;
    const char *name;
    cc_blk *top;
    uint32_t n_params;    /* its source's, then one per hidden channel */
    cc_node **params;
    bool *param_live;     /* after DCE: parameters the body reads */
    uint32_t gate_param;  /* the parameter whose CALL token gates the body */
    uint32_t n_results;   /* its source's, then one per hidden channel */
    /* The order tokens of the channels it feeds or fetches (host.c): the
     * hidden parameter src->n_params + j and the hidden result
     * src->n_results + j carry channel hidden[j]. The entry has none (its
     * tokens start at 0) unless it is also called. */
    uint32_t n_hidden;
    uint32_t *hidden;
    bool dropped;         /* no call left after optimization */
    /* lowering */
    uint32_t region;
    uint32_t n_loops;     /* for automatic loop names */
    uint32_t *pvirt;      /* per parameter (or the hidden trigger when there
                             are none): the placeholder its CALLs feed */
    void *res;            /* per result: where the body's value is */
};

/* ---- The compiler's state -------------------------------------------------------- */
struct cc {
    ut_arena ar;          /* every compiler allocation; freed at the end */
    const char *src;
    size_t len;
    const char *name;
    tfvm_error *err;
    jmp_buf *jb;          /* errors unwind here (one thread; arena memory only) */
    tfvm_status status;
    int opt;              /* optimization level */
    uint32_t depth;       /* parser/checker recursion guard */
    /* lexer */
    cc_tok *toks;
    uint32_t n_toks, tp;
    uint32_t funcs_cap;
    void *parse_state;    /* parse.c's scopes while it runs */
    bool defs_broken;     /* a definition failed to parse: nothing is type checked */
    /* module */
    cc_module mod;
    uint32_t next_node_id;
    /* IR */
    uint32_t n_ifns;
    cc_ifn **ifns;        /* reachable functions, entry first */
    cc_ifn *entry_ifn;
    bool entry_wrapped;   /* the entry is also called: ROOT calls it */
    /* options */
    bool overflow_trap;   /* integer + - * check for overflow (ADD_OV ...) */
    const cc_origin *origin; /* importers: the node being translated (cc_set_origin) */
    /* diagnostics: errors are collected (several per compile), warnings too */
    uint32_t n_errors;
    bool fatal;           /* out of memory or too many errors: recovery points rethrow */
    size_t msg_len;       /* bytes of err->message used by the errors so far */
    char *warnings;       /* "\n"-separated formatted warnings, NULL when none */
    size_t warn_len, warn_cap;
    uint32_t n_warnings;
    const char *dir;      /* the source's directory, for load("...") */
    /* channels of feed and fetch, in the order the source first names them */
    uint32_t n_chans, cap_chans;
    struct cc_chan *chans;
    /* source variables and the values they name (cc_add_var), for the
     * program's variable table */
    uint32_t n_vars, cap_vars;
    struct cc_srcvar *vars;
};

/* A source variable: a .tfg let, var, parameter or loop variable, an
 * imported model's tensor; the lowering finds the output that carries v. */
typedef struct cc_srcvar {
    cc_irval v;
    const char *name;
} cc_srcvar;
/* Records that v is the value of source variable `name` (not copied: it
 * lives as long as C). Names the program cannot keep are dropped later. */
void cc_add_var(cc *C, cc_irval v, const char *name);

/* A channel (host.c): fed or fetched, never both; every feed of it
 * declares one type. */
typedef struct cc_chan {
    const char *name;
    bool fed;
    cc_vtype type;        /* fed: the declared type */
    cc_pos pos;           /* where the source first names it */
    const char *order;    /* its order token's name in the graph ("x.order") */
    cc_cval cname;        /* its name as the u8[n] constant of FEED's and FETCH's attribute a */
} cc_chan;

/* Recursion guards (the C stack is the limit): the parser counts about two
 * units per parenthesis and three per nested block, so 600 allows some 300
 * levels of parentheses or 200 of nested blocks; the checker and the IR
 * builder recurse once per operator, so a chain a + b + ... has at most
 * CC_MAX_CHAIN operators. */
#define CC_MAX_DEPTH 600
#define CC_MAX_CHAIN 1000

/* compiler.c: a fresh state over src (NULL for other front ends, compiler/build.h),
 * and the back half every front end shares: optimize the IR (C->opt > 0),
 * lower it, the ISA-level passes, verify. Both unwind on failure. */
void cc_init(cc *C, const char *src, size_t len, const char *name, const tfvm_allocator *a, tfvm_error *err);
void cc_finish(cc *C, isa_program *out);

/* Errors: format "NAME:LINE:COL: message" + source line + caret, record it
 * (several errors per compile: err->message holds them one after another)
 * and unwind to the innermost recovery point (C->jb). cc_quiet unwinds
 * without a message (a use of something whose declaration already failed). */
_Noreturn void cc_error(cc *C, cc_pos pos, tfvm_status code, const char *fmt, ...) UT_PRINTF(4, 5);
_Noreturn void cc_quiet(cc *C);
/* "NAME:LINE:COL: warning: message" (no quote), kept for the caller. */
void cc_warn(cc *C, cc_pos pos, const char *fmt, ...) UT_PRINTF(3, 4);
/* The candidate nearest to name by edit distance (at most 2, and less than
 * half its length), or NULL: "did you mean 'x'?". */
const char *cc_suggest(const char *name, const char *const *cands, uint32_t n);
/* A deep copy of an unchecked expression (statement lowering duplicates code). */
cc_expr *cc_clone(cc *C, const cc_expr *e);
cc_ablock *cc_clone_block(cc *C, const cc_ablock *b);
_Noreturn void cc_nomem(cc *C);
void *cc_alloc(cc *C, size_t n);                 /* zeroed; unwinds on failure */
void *cc_array(cc *C, size_t count, size_t size);
char *cc_strndup(cc *C, const char *s, size_t n);
/* Grows an arena array of `*cap` elements to hold at least n + 1. */
void *cc_grow(cc *C, void *p, uint32_t n, uint32_t *cap, size_t size);

/* lex.c */
void cc_lex(cc *C);
const char *cc_tk_name(cc_tk k);
/* parse.c */
void cc_parse(cc *C);
/* load.c: fills the tensor literal e with the array in path (.npy) or the
 * member of a .npz (stored, not compressed); path is relative to the source
 * file's directory. */
void cc_load(cc *C, cc_expr *e, const char *path, cc_pos pos, const char *member, cc_pos member_pos);
/* types.c */
void cc_check(cc *C, const char *entry);
bool cc_vtype_eq(const cc_vtype *a, const cc_vtype *b);
void cc_vtype_str(const cc_vtype *t, char *buf, size_t size);
/* builtins.c: the tensor ops (docs/language.md, "Tensor ops"). Arguments
 * bind by position or by keyword (`axis = 1`); the checker checks each with
 * the hint its kind asks for, then the rule checks dtypes and known shapes,
 * sets the call's type and its operands (e->u.call.ops) and attribute. */
typedef enum cc_pkind {
    CC_P_VALUE,   /* an operand */
    CC_P_HINTED,  /* an operand whose literal takes the dtype the call should give (fill, range) */
    CC_P_INTS,    /* integers fixed at compile time: 2 or [1, 2] */
    CC_P_BOOL,    /* true or false */
    CC_P_SHAPE    /* an i64 vector: a list literal ([-1, 784]) or any i64[N] value */
} cc_pkind;

#define CC_MAX_BPARAMS 6

typedef struct cc_bparam {
    const char *name;
    uint8_t kind;         /* cc_pkind */
    bool optional;
} cc_bparam;

typedef struct cc_builtin {
    const char *name;
    isa_op op;
    uint8_t n_params;
    cc_bparam params[CC_MAX_BPARAMS];
    /* args[k]: the argument bound to parameter k, NULL when left out */
    void (*rule)(cc *C, const struct cc_builtin *b, cc_expr *e, cc_expr *const *args);
} cc_builtin;

const cc_builtin *cc_builtin_find(const char *name);
/* x[idx] along `axis` (the indexing sugar): a checked GATHER call. */
cc_expr *cc_gather(cc *C, cc_pos pos, cc_expr *x, cc_expr *idx, int axis);
/* host.c: after type checking, the channel table, the channels of every
 * function (a fixpoint over calls), and the errors: a channel both fed and
 * fetched, fed with two types, a bare loop that touches no channel. */
void cc_check_channels(cc *C);
/* The bitset's words (64 channels each), and the channels an expression
 * (a block) feeds or fetches, itself or through calls, or'ed into set. */
uint32_t cc_chan_words(const cc *C);
void cc_chan_uses(cc *C, const cc_expr *e, uint64_t *set);
void cc_chan_uses_block(cc *C, const cc_ablock *b, uint64_t *set);
/* ir.c */
void cc_build_ir(cc *C);
/* The final value of loop variable k of While w (its output): the variable
 * itself, or for an order token fed or fetched in the condition, its value
 * after the condition (then head->res[1 + k]). */
cc_irval cc_loop_exit(const cc_node *w, uint32_t k);
cc_irval cc_resolve(cc_irval v);
cc_node *cc_node_new(cc *C, cc_blk *b, cc_nk kind, uint32_t n_in, uint32_t n_out, cc_pos pos);
void cc_node_unlink(cc_node *n);
bool cc_op_may_fail(const cc_node *n);
/* opt.c */
void cc_optimize(cc *C);
void cc_dce(cc *C);
/* lower.c */
void cc_lower(cc *C, isa_program *out);
/* An edge while a graph is rebuilt (lower.c, prune.c); cc_edge_cmp orders
 * them canonically: by source, output, destination, port. */
typedef struct cc_edge {
    uint32_t src, out, dst, port;
} cc_edge;
int cc_edge_cmp(const void *a, const void *b);
/* prune.c: sets ISA_FLAG_PRUNE_* on the SWITCHes whose untaken side needs no dead tokens. */
void cc_prune_switches(cc *C, isa_program *p);
/* prune.c: a SWITCH on a comparison of its own data with a constant becomes a BRANCH. */
void cc_fuse_branches(cc *C, isa_program *p);
/* prune.c: removes the join MERGEs of bodies that have no dead tokens. */
void cc_elide_merges(cc *C, isa_program *p);

#endif
