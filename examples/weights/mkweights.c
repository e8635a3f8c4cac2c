/* examples/weights/mkweights.c — writes the weights and sample inputs of the
 * example models (examples/{mlp,cnn,rnn,treernn}.tfg) as .npy files. Every
 * value comes from a fixed hash of (tensor name, element index), so the files
 * are the same on every machine and examples/weights/reference.py rebuilds
 * them bit for bit in NumPy. Standalone (no libtfvm), so one command builds it:
 *   cc -O2 -o build/mkweights examples/weights/mkweights.c && build/mkweights build/weights
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* splitmix64's finalizer: a counter-based generator, value k of a tensor is
 * mix(seed << 32 | k) where seed is the FNV-1a hash of the tensor's name. */
static uint64_t mix(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t name_seed(const char *name)
{
    uint32_t h = 2166136261u;
    for (const char *p = name; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    return h;
}

/* 24 random bits of element k */
static uint32_t bits24(uint64_t seed, uint64_t k) { return (uint32_t)(mix(seed << 32 | k) >> 40); }

enum kind {
    SYM,  /* uniform in [-scale, scale): weights and biases */
    UNIT, /* uniform in [0, 1): pixels */
};

typedef struct spec {
    const char *name;
    enum kind kind;
    double scale;
    int rank;
    int64_t dims[4];
} spec;

/* Weight scales keep activations of order 1: sqrt(6 / fan_in) before a
 * relu, sqrt(1 / fan_in) before a tanh; biases 0.1. */
static const spec specs[] = {
    /* examples/mlp.tfg: 784-512-512-10 */
    {"mlp_w1", SYM, 0.0874818765, 2, {784, 512}},   /* sqrt(6/784) */
    {"mlp_b1", SYM, 0.1, 1, {512}},
    {"mlp_w2", SYM, 0.1082531755, 2, {512, 512}},   /* sqrt(6/512) */
    {"mlp_b2", SYM, 0.1, 1, {512}},
    {"mlp_w3", SYM, 0.1082531755, 2, {512, 10}},
    {"mlp_b3", SYM, 0.1, 1, {10}},
    {"mlp_x", UNIT, 1.0, 2, {4, 784}},              /* the e2e test's batch */
    {"mlp_xb", UNIT, 1.0, 2, {256, 784}},           /* the benchmark's batch */
    /* examples/cnn.tfg: conv 1->8, pool, conv 8->16, pool, dense 784->10 */
    {"cnn_c1w", SYM, 0.8164965809, 4, {8, 1, 3, 3}}, /* sqrt(6/9) */
    {"cnn_c1b", SYM, 0.1, 1, {8}},
    {"cnn_c2w", SYM, 0.2886751346, 4, {16, 8, 3, 3}}, /* sqrt(6/72) */
    {"cnn_c2b", SYM, 0.1, 1, {16}},
    {"cnn_fw", SYM, 0.0874818765, 2, {784, 10}},
    {"cnn_fb", SYM, 0.1, 1, {10}},
    {"cnn_x", UNIT, 1.0, 4, {2, 1, 28, 28}},
    {"cnn_xb", UNIT, 1.0, 4, {64, 1, 28, 28}},
    /* examples/rnn.tfg: 16 inputs, 32 hidden, 4 outputs; sequence [T, B, 16] */
    {"rnn_wx", SYM, 0.25, 2, {16, 32}},             /* sqrt(1/16) */
    {"rnn_wh", SYM, 0.1767766953, 2, {32, 32}},     /* sqrt(1/32) */
    {"rnn_b", SYM, 0.1, 1, {32}},
    {"rnn_wo", SYM, 0.1767766953, 2, {32, 4}},
    {"rnn_bo", SYM, 0.1, 1, {4}},
    {"rnn_xs", SYM, 1.0, 3, {6, 3, 16}},
    /* examples/treernn.tfg: 20 words of 16 values, a 32 -> 16 composition */
    {"tree_emb", SYM, 1.0, 2, {20, 16}},
    {"tree_w", SYM, 0.1767766953, 2, {32, 16}},
    {"tree_b", SYM, 0.1, 1, {16}},
    {"tree_wo", SYM, 0.25, 2, {16, 4}},
    {"tree_bo", SYM, 0.1, 1, {4}},
};

/* The tree of examples/treernn.tfg: TREE_LEAVES leaves; node(lo, hi) covers
 * leaves lo..hi-1 and splits them at a hashed point; nodes are numbered in
 * preorder (the root is 0); a leaf's word is a hashed index below 20. */
#define TREE_LEAVES 9
#define TREE_WORDS 20
#define TREE_NODES (2 * TREE_LEAVES - 1)

static int64_t tree_left[TREE_NODES], tree_right[TREE_NODES], tree_word[TREE_NODES];
static int tree_n;

static int64_t build_tree(int64_t lo, int64_t hi)
{
    int64_t me = tree_n++;
    uint64_t seed = name_seed("tree");
    if (hi - lo == 1) {
        tree_left[me] = tree_right[me] = -1;
        tree_word[me] = bits24(seed, (uint64_t)lo) % TREE_WORDS;
        return me;
    }
    int64_t split = lo + 1 + (int64_t)(bits24(seed, 1000 + (uint64_t)lo * 100 + (uint64_t)hi) % (uint64_t)(hi - lo - 1));
    tree_word[me] = -1;
    tree_left[me] = build_tree(lo, split);
    tree_right[me] = build_tree(split, hi);
    return me;
}

/* Writes a C-order little-endian .npy file (format 1.0, NumPy's padding). */
static int save(const char *dir, const char *name, const char *descr, int rank, const int64_t *dims, const void *data,
                size_t nbytes)
{
    char path[4096], shape[128] = "", header[256];
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    for (int i = 0; i < rank; i++) {
        size_t n = strlen(shape);
        snprintf(shape + n, sizeof shape - n, "%lld%s", (long long)dims[i], rank == 1 ? "," : i + 1 < rank ? ", " : "");
    }
    int len = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, shape);
    int total = 10 + len + 1, pad = (64 - total % 64) % 64;
    memset(header + len, ' ', (size_t)pad);
    header[len + pad] = '\n';
    uint16_t hlen = (uint16_t)(len + pad + 1);
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "mkweights: %s: %s\n", path, strerror(errno));
        return 1;
    }
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hlen & 0xFF), (unsigned char)(hlen >> 8)};
    int ok = fwrite(pre, 1, 10, f) == 10 && fwrite(header, 1, hlen, f) == hlen && fwrite(data, 1, nbytes, f) == nbytes;
    ok &= fclose(f) == 0;
    if (!ok)
        fprintf(stderr, "mkweights: cannot write %s\n", path);
    return !ok;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: mkweights OUTDIR\n");
        return 2;
    }
    const char *dir = argv[1];
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "mkweights: %s: %s\n", dir, strerror(errno));
        return 1;
    }
    int bad = 0;
    for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++) {
        const spec *p = &specs[s];
        size_t n = 1;
        for (int i = 0; i < p->rank; i++)
            n *= (size_t)p->dims[i];
        float *v = malloc(n * sizeof *v);
        if (!v) {
            fprintf(stderr, "mkweights: out of memory\n");
            return 1;
        }
        uint64_t seed = name_seed(p->name);
        for (size_t k = 0; k < n; k++) {
            double u = (double)bits24(seed, k);
            v[k] = (float)(p->kind == UNIT ? u / 16777216.0 : (u / 8388608.0 - 1.0) * p->scale);
        }
        bad |= save(dir, p->name, "<f4", p->rank, p->dims, v, n * sizeof *v);
        free(v);
    }
    build_tree(0, TREE_LEAVES);
    int64_t nodes = TREE_NODES;
    bad |= save(dir, "tree_left", "<i8", 1, &nodes, tree_left, sizeof tree_left);
    bad |= save(dir, "tree_right", "<i8", 1, &nodes, tree_right, sizeof tree_right);
    bad |= save(dir, "tree_word", "<i8", 1, &nodes, tree_word, sizeof tree_word);
    return bad;
}
