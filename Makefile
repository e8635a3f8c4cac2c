# tfvm — one hand-written Makefile.
#   make            build/bin/tfvm, build/lib/libtfvm.a, build/lib/libtfvm.so
#   make test       build and run every test (layers, unit suites, end-to-end, make pytest)
#   make layers     check that no library layer includes a higher one (test/layers.sh)
#   make pytest     the Python package (python/) in a venv under build/, and its pytest suite
#   make asan       the whole test suite under AddressSanitizer + UBSan
#   make tsan       scheduler and VM tests under ThreadSanitizer
#   make fuzz       libFuzzer on the loader, assembler and .npy reader (FUZZ_SECONDS each)
#   make fuzz-compiler  differential test of the compiler on FUZZ_N random programs
#   make install    PREFIX=/usr/local (DESTDIR honoured)
#   make bench      benchmarks (ratios against references run in the same run)
#   make bench-vm   only the VM's: recursion vs C and CPython, per-run costs (PASS/MISS)
#   make bench-ipf  instructions per firing / call / iteration (valgrind), load-independent
#   make gpu-check  the CUDA backend on a real GPU (one line where there is none)

CC      ?= cc
PREFIX  ?= /usr/local
BUILD   ?= build
SAN     ?=
OPT     ?= -O2

# Warnings: -Wall -Wextra -Werror everywhere (the project's rule);
# -Wshadow and -Wstrict-prototypes catch the bugs we have actually had in C
# VMs; -Wvla because every stack array here must have a fixed bound.
WARN    := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wvla -Wpointer-arith
CFLAGS  ?= $(OPT) -g
# OpenBLAS (Debian: libopenblas-dev) for the CPU tensor kernels; its cblas.h
# lives in a per-variant directory that pkg-config names. libtfvm loads it
# with dlopen at the first matrix product (devices/cpu/blas.h); only the
# unit tests and the matmul benchmark, which call it directly, link it.
BLAS_CFLAGS  := $(shell pkg-config --cflags openblas 2>/dev/null)
BLAS_LIBS    := $(shell pkg-config --libs openblas 2>/dev/null || echo -lopenblas)
CPPFLAGS_ALL := -I. -Iinclude -D_GNU_SOURCE $(BLAS_CFLAGS) -I$(BUILD)/gen
# -ffp-contract=off: a * b + c rounds twice with every compiler (GCC's ISO C
# mode already does; clang would fuse it into an FMA, and its results then
# differed in the last digit: the coexec example's training loss).
CFLAGS_ALL   := -std=c11 $(WARN) $(CFLAGS) -ffp-contract=off -fPIC -fvisibility=hidden -pthread
LDLIBS_ALL   := $(shell pkg-config --libs hwloc 2>/dev/null || echo -lhwloc) $(shell pkg-config --libs libprotobuf-c 2>/dev/null || echo -lprotobuf-c) -pthread -lm -ldl

# The debugger's line editing (tfvm debug): libedit when pkg-config finds it;
# without it the debugger reads plain lines.
EDIT_LIBS := $(shell pkg-config --libs libedit 2>/dev/null)
ifneq ($(EDIT_LIBS),)
$(BUILD)/obj/tools/debug.o: CPPFLAGS += -DTFVM_HAVE_LIBEDIT $(shell pkg-config --cflags libedit)
endif

ifneq ($(SAN),)
CFLAGS_ALL += -fsanitize=$(SAN) -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS    += -fsanitize=$(SAN)
endif

# Protocol buffers for the importers (import/, docs/onnx.md, docs/tensorflow.md):
# protoc-c turns Debian's onnx.proto (libonnx-dev) and our own
# import/proto/*.proto into C at build time, under $(BUILD)/gen; nothing
# generated is committed. The generated code is protoc-c's, so it is built
# without -Werror's extra warnings (it is not ours to fix).
ONNX_PROTO ?= /usr/include/onnx/onnx.proto
GEN        := $(BUILD)/gen
PROTOS     := $(ONNX_PROTO) $(wildcard import/proto/*.proto)
GEN_SRC    := $(foreach p,$(PROTOS),$(GEN)/$(basename $(notdir $(p))).pb-c.c)
GEN_HDR    := $(GEN_SRC:.c=.h)
GEN_OBJ    := $(GEN_SRC:$(GEN)/%.c=$(BUILD)/obj/gen/%.o)
PBC_CFLAGS := $(shell pkg-config --cflags libprotobuf-c 2>/dev/null)
PBC_LIBS   := $(shell pkg-config --libs libprotobuf-c 2>/dev/null || echo -lprotobuf-c)

LIB_DIRS := util isa loader analysis compiler import front vm scheduler devices devices/cpu devices/cuda
LIB_SRC  := $(foreach d,$(LIB_DIRS),$(wildcard $(d)/*.c))
CLI_SRC  := $(wildcard tools/*.c)
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o) $(GEN_OBJ)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
DEPS     := $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d)

TFVM     := $(BUILD)/bin/tfvm
LIBA     := $(BUILD)/lib/libtfvm.a
LIBSO    := $(BUILD)/lib/libtfvm.so

CHECK_CFLAGS := $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS   := $(shell pkg-config --libs check 2>/dev/null)
UNIT_SRC := $(wildcard test/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:test/unit/%.c=$(BUILD)/test/%)

.PHONY: all test layers unit e2e pytest asan tsan fuzz fuzz-compiler install uninstall clean bench bench-vm bench-ipf check-deps cuda gpu-check gpu-check-fake
all: $(TFVM) $(LIBA) $(LIBSO) cuda

# The CUDA backend (docs/devices.md): built whenever nvcc exists (on PATH or
# in CUDA_HOME), into a library that libtfvm loads with dlopen when asked for
# a GPU -- libtfvm itself never links CUDA. NVCC_ARCH: the GPUs to compile for
# (SASS for Turing, Ampere, Hopper; PTX for newer ones).
CUDA_HOME ?= /usr/local/cuda
NVCC      ?= $(shell command -v nvcc 2>/dev/null || { test -x $(CUDA_HOME)/bin/nvcc && echo $(CUDA_HOME)/bin/nvcc; })
NVCC_ARCH ?= -gencode arch=compute_75,code=sm_75 -gencode arch=compute_80,code=sm_80 \
             -gencode arch=compute_90,code=[sm_90,compute_90]
CUDA_LIB  := $(BUILD)/lib/libtfvm_cuda.so
CUDA_SRC  := devices/cuda/backend.cu
CUDA_RPATH := $(patsubst %/bin/nvcc,%,$(NVCC))/lib64
ifneq ($(NVCC),)
cuda: $(CUDA_LIB)
$(BUILD)/obj/devices/cuda/cuda.o: CPPFLAGS += -DTFVM_CUDA_BUILT
$(CUDA_LIB): $(CUDA_SRC) devices/cuda/abi.h devices/cuda/elem.h devices/cuda/tens.h
	@mkdir -p $(dir $@)
	$(NVCC) -std=c++17 -O2 -I. -Iinclude $(NVCC_ARCH) -Xcompiler -fPIC,-fvisibility=hidden,-Wall,-Wextra,-Werror \
	    -shared -cudart shared -Xlinker -rpath,$(CUDA_RPATH) -o $@ $(CUDA_SRC) -lcublas
else
cuda:
	@echo "make: nvcc not found (PATH, $(CUDA_HOME)/bin): the CUDA backend libtfvm_cuda.so is not built"
endif

# A host stand-in for libtfvm_cuda.so (test/unit/fake_cuda.c) that the device
# tests load through TFVM_CUDA_LIB, so placement and copies are tested without a GPU.
FAKE_CUDA := $(BUILD)/test/libtfvm_fakecuda.so
$(FAKE_CUDA): test/unit/fake_cuda.c devices/cuda/abi.h devices/cuda/elem.h devices/cuda/tens.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS_ALL) $(CFLAGS_ALL) -shared $(LDFLAGS) -o $@ $< -lm
$(BUILD)/test/test_devices $(BUILD)/test/test_placement: $(FAKE_CUDA)

# debug.o is rebuilt when libedit comes or goes (a build made before
# .ci/deps.sh installed it would otherwise keep the plain-lines debugger)
EDIT_STAMP := $(BUILD)/obj/tools/libedit.flags
$(EDIT_STAMP): FORCE
	@mkdir -p $(@D)
	@echo '$(EDIT_LIBS)' | cmp -s - $@ || echo '$(EDIT_LIBS)' > $@
$(BUILD)/obj/tools/debug.o: $(EDIT_STAMP)
.PHONY: FORCE
FORCE:

# The step loop of sequential frames (docs/frames.md): GCC's SLP vectoriser
# pairs two counter updates into a 128-bit load, add and store, six
# instructions for two on every step (without it fib takes 338 -> 326
# instructions per call); and its functions start on a cache line, so that
# code before them does not move the loop (fib(30) ran 9% slower when a
# function ahead of it grew by 16 bytes). clang takes both flags.
$(BUILD)/obj/vm/seq.o: CFLAGS_ALL += -fno-tree-slp-vectorize -falign-functions=64

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS_ALL) $(CPPFLAGS) $(CFLAGS_ALL) -MMD -MP -c $< -o $@

$(GEN)/%.pb-c.c $(GEN)/%.pb-c.h: import/proto/%.proto
	@mkdir -p $(GEN)
	protoc-c --c_out=$(GEN) -Iimport/proto $<
$(GEN)/onnx.pb-c.c $(GEN)/onnx.pb-c.h &: $(ONNX_PROTO)
	@mkdir -p $(GEN)
	protoc-c --c_out=$(GEN) -I$(dir $(ONNX_PROTO)) $<
$(BUILD)/obj/gen/%.o: $(GEN)/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS_ALL) $(PBC_CFLAGS) -std=c11 $(CFLAGS) -fPIC -fvisibility=hidden -c $< -o $@
# The importers include the generated headers: make them first.
$(filter $(BUILD)/obj/import/%,$(LIB_OBJ)): | $(GEN_HDR)

$(LIBA): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

$(LIBSO): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,libtfvm.so.0 $(LDFLAGS) -o $@ $^ $(LDLIBS_ALL)

$(TFVM): $(CLI_OBJ) $(LIBA)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(LIBA) $(LDLIBS_ALL) $(EDIT_LIBS)

$(BUILD)/test/%: test/unit/%.c test/unit/testutil.h test/unit/kernutil.h test/unit/onnx_util.h test/unit/onnx_check.h $(LIBA)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS_ALL) $(CHECK_CFLAGS) $(CFLAGS_ALL) -fvisibility=default -o $@ $< $(LIBA) $(CHECK_LIBS) $(LDLIBS_ALL) $(BLAS_LIBS)

# test_blas_pool checks OpenBLAS as libtfvm loads it (dlopen): not linked
$(BUILD)/test/test_blas_pool: test/unit/test_blas_pool.c test/unit/testutil.h $(LIBA)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS_ALL) $(CHECK_CFLAGS) $(CFLAGS_ALL) -fvisibility=default -o $@ $< $(LIBA) $(CHECK_LIBS) $(LDLIBS_ALL)

check-deps:
	@pkg-config --exists check || { echo "make: the unit tests need Check (apt-get install check)"; exit 1; }

# Unit suites run from the repository root so fixtures are found by path.
# CK_FORK=no under ASan keeps leak reports attached to the failing test.
# The suites run one after another (even under -j) so their output reads in order.
# Sanitized builds run several times slower: their Check timeouts (there to
# catch a hang) are four times as long (session's 400 lockstep VMs took 68 s
# under ASan against a 60 s limit).
CK_MULT := $(if $(SAN),4,1)
RUN_UNIT = set -e; for t in $(UNIT_BIN); do echo "== $$t"; CK_TIMEOUT_MULTIPLIER=$(CK_MULT) $$t; done
RUN_E2E  = TFVM=$(TFVM) BUILD=$(BUILD) SAN=$(SAN) FAKE_CUDA=$(FAKE_CUDA) bash test/e2e/run.sh
RUN_DEBUG = TFVM=$(TFVM) bash test/debug/run.sh

unit: check-deps $(UNIT_BIN)
	@$(RUN_UNIT)

e2e: all $(FAKE_CUDA)
	@$(RUN_E2E)
	@$(RUN_DEBUG)

# The library's layers point down (docs/architecture.md): a lower one never
# includes a higher one, beyond the commented exceptions of test/layers.allow.
layers:
	@bash test/layers.sh

test: check-deps layers all $(UNIT_BIN) $(FAKE_CUDA)
	@$(RUN_UNIT)
	@$(RUN_E2E)
	@$(MAKE) --no-print-directory gpu-check gpu-check-fake
	@$(RUN_DEBUG)
	@$(MAKE) --no-print-directory pytest
	@echo "make test: all suites passed ($(BUILD))"

# The Python package (python/, docs/python.md), built into a venv under
# $(BUILD) with numpy, pytest and setuptools from PyPI, and its pytest suite.
# Without PyPI or python3's venv it says it skipped. Under SAN (make asan) the
# extension is instrumented too and the sanitizers' runtimes preloaded.
PYTHON3 ?= python3
pytest: $(LIBA) $(FAKE_CUDA)
	@SAN=$(SAN) CC=$(CC) bash python/tests/run.sh $(PYTHON3) $(BUILD)/py-venv $(BUILD)

asan:
	$(MAKE) BUILD=build/asan SAN=address,undefined OPT=-O1 test

# The ONNX node cases are left out (TFVM_ONNX_SKIP): under TSan their 2,800
# forked runs take some 20 minutes, and the VM's threads are what test_vm,
# test_vm_stress and test_sched exercise there. Then the TSan-built tfvm runs
# the examples and models on 2 and 4 worker threads (test/e2e/tsan_cli.sh,
# about half a minute). Any TSan report fails: halt_on_error, exit code 66.
TSAN_ENV := TSAN_OPTIONS="halt_on_error=1 exitcode=66 $(TSAN_OPTIONS)"
tsan:
	$(TSAN_ENV) TFVM_ONNX_SKIP=1 $(MAKE) BUILD=build/tsan SAN=thread OPT=-O1 build/tsan/bin/tfvm unit
	@tmp=$$(mktemp -d) && $(TSAN_ENV) bash test/e2e/tsan_cli.sh build/tsan/bin/tfvm $$tmp; \
	    rc=$$?; rm -rf $$tmp; exit $$rc

# Each target: test/fuzz/fuzz_NAME.c, dictionary test/fuzz/NAME.dict (if any),
# seeds: .tfvm files, .tfasm examples, NumPy-made .npy fixtures, models (run:
# imports and runs them; session: drives the session API from host threads).
# FUZZ_SECONDS each.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= loader asm npy onnx tf run session
FUZZ_CFLAGS  := $(CPPFLAGS_ALL) -std=c11 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
fuzz: $(GEN_SRC) $(GEN_HDR)
	@set -e; for t in $(FUZZ_TARGETS); do \
	    mkdir -p build/fuzz/corpus-$$t; \
	    echo "== fuzz $$t ($(FUZZ_SECONDS) s)"; \
	    clang $(FUZZ_CFLAGS) -o build/fuzz/fuzz_$$t test/fuzz/fuzz_$$t.c $(LIB_SRC) $(GEN_SRC) $(PBC_CFLAGS) $(LDLIBS_ALL); \
	    dict=; [ -f test/fuzz/$$t.dict ] && dict=-dict=test/fuzz/$$t.dict; \
	    case $$t in loader) seeds=test/fuzz/seeds;; asm) seeds="examples/asm test/fuzz/asm_seeds";; npy) seeds=test/data/npy;; onnx) seeds=test/onnx/models;; tf) seeds=test/tf/fixtures;; run) seeds="test/onnx/models test/tf/fixtures test/fuzz/run_seeds";; *) seeds=;; esac; \
	    build/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -timeout=10 $$dict build/fuzz/corpus-$$t $$seeds; \
	done

# Random programs run by the VM (compiled with -O0 and -O1) and by a reference
# evaluator of the typed AST must agree (test/unit/test_diff.c; `make test`
# runs 300 of them).
FUZZ_N    ?= 10000
FUZZ_SEED ?= 20260101
$(BUILD)/test/test_diff: test/gen/gen.h test/gen/eval.h
fuzz-compiler: check-deps $(BUILD)/test/test_diff
	TFVM_DIFF_N=$(FUZZ_N) TFVM_DIFF_SEED=$(FUZZ_SEED) $(BUILD)/test/test_diff

# The bench programs over the public API, one rule for all:
#   bench/matmul.c    1024^3 f32 MATMUL through the VM against cblas_sgemm in-process
#   bench/gemm.c      f32 products of model sizes through the VM against cblas_sgemm, 1 and 2 threads
#   bench/modelrun.c  one model's time through tfvm.h (bench/ortmodels.sh)
#   bench/act.c       f32 EXP, SIGMOID, ERF, TANH through the VM against libm loops in-process
#   bench/coexec.c    Terra's co-execution (issue 16), a session against serialized runs
# (bench/terra.py, last: tfvm.terra against plain NumPy on examples/terra/, docs/terra.md)
BENCH_MATMUL := $(BUILD)/bench/matmul
BENCH_GEMM := $(BUILD)/bench/gemm
BENCH_MODELRUN := $(BUILD)/bench/modelrun
BENCH_ACT := $(BUILD)/bench/act
BENCH_COEXEC := $(BUILD)/bench/coexec
BENCH_BINS := $(BENCH_MATMUL) $(BENCH_GEMM) $(BENCH_MODELRUN) $(BENCH_ACT) $(BENCH_COEXEC)
$(BENCH_BINS): $(BUILD)/bench/%: bench/%.c $(LIBA)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS_ALL) $(CFLAGS_ALL) $(LDFLAGS) -o $@ $< $(LIBA) $(LDLIBS_ALL) $(BLAS_LIBS)

# make gpu-check (docs/devices.md): test/gpu/carry.sh gathers what the check
# runs into $(BUILD)/gpu-check (< 64 MiB, with the libraries it loads);
# test/gpu/check.sh runs it: on a machine without a GPU one line, exit 0. On
# the GPU machine, where nothing is built: bash test/gpu/check.sh.
# gpu-check-fake runs the whole check on the host stand-in (make test).
GPU_CHECK_BINS := $(TFVM) $(BUILD)/test/test_devices $(BUILD)/test/test_placement $(BENCH_MODELRUN)
ifneq ($(NVCC),)
CUBLAS_SGEMM := $(BUILD)/bench/cublas_sgemm
$(CUBLAS_SGEMM): bench/cublas_sgemm.cu
	@mkdir -p $(dir $@)
	$(NVCC) -std=c++17 -O2 $(NVCC_ARCH) -Xlinker -rpath,$(CUDA_RPATH) -o $@ $< -lcublas
endif
$(BUILD)/gpu-check/bin/tfvm: $(GPU_CHECK_BINS) $(FAKE_CUDA) $(CUBLAS_SGEMM) $(wildcard $(CUDA_LIB)) test/gpu/carry.sh
	@BUILD=$(BUILD) CC=$(CC) bash test/gpu/carry.sh
gpu-check: cuda $(BUILD)/gpu-check/bin/tfvm
	@BUILD=$(BUILD) bash test/gpu/check.sh
gpu-check-fake: cuda $(BUILD)/gpu-check/bin/tfvm $(FAKE_CUDA)
	@BUILD=$(BUILD) GPU_CHECK_FAKE=$(FAKE_CUDA) GPU_CHECK_OUT=$(BUILD)/gpu-check-fake \
	    bash test/gpu/check.sh >/dev/null 2>&1; rc=$$?; \
	    [ $$rc -eq 0 ] || cat $(BUILD)/gpu-check-fake/summary.txt; \
	    echo "gpu-check on the stand-in: $$(grep -c ' PASS ' $(BUILD)/gpu-check-fake/summary.txt) checks passed, exit $$rc"; \
	    exit $$rc

# bench-vm: only the VM's rows (bench/run.sh and bench/sched.sh: recursion
# against C and CPython, the per-run and per-iteration targets), in a minute.
bench-vm: $(TFVM)
	@TFVM=$(TFVM) CC=$(CC) bash bench/run.sh
	@TFVM=$(TFVM) bash bench/sched.sh

# bench-ipf: instructions per firing, per call and per loop iteration on one
# thread, counted by valgrind (independent of the machine's load).
bench-ipf: $(TFVM)
	@TFVM=$(TFVM) CC=$(CC) bash bench/ipf.sh

bench: all $(BENCH_BINS)
	@TFVM=$(TFVM) CC=$(CC) bash bench/run.sh
	@TFVM=$(TFVM) bash bench/sched.sh
	@TFVM=$(TFVM) CC=$(CC) bash bench/models.sh
	@$(BENCH_MATMUL)
	@$(BENCH_GEMM)
	@$(BENCH_ACT)
	@$(BENCH_COEXEC)
	@TFVM=$(TFVM) bash bench/onnx.sh
	@TFVM=$(TFVM) bash bench/tf.sh
	@SET=conv MODELRUN=$(BENCH_MODELRUN) bash bench/ortmodels.sh
	@SET=seq MODELRUN=$(BENCH_MODELRUN) bash bench/ortmodels.sh
	@TFVM=$(TFVM) BUILD=$(BUILD) bash bench/python.sh
	@if [ -x $(BUILD)/py-venv/bin/python ]; then $(BUILD)/py-venv/bin/python bench/terra.py --jax-python $${BENCH_VENV:-build/bench-venv}/bin/python; \
	    else echo "bench: Terra rows skipped: no $(BUILD)/py-venv (make pytest says why)"; fi

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 755 $(TFVM) $(DESTDIR)$(PREFIX)/bin/tfvm
	install -m 644 $(LIBA) $(DESTDIR)$(PREFIX)/lib/libtfvm.a
	install -m 755 $(LIBSO) $(DESTDIR)$(PREFIX)/lib/libtfvm.so.0
	[ ! -f $(CUDA_LIB) ] || install -m 755 $(CUDA_LIB) $(DESTDIR)$(PREFIX)/lib/libtfvm_cuda.so
	ln -sf libtfvm.so.0 $(DESTDIR)$(PREFIX)/lib/libtfvm.so
	install -m 644 include/tfvm.h $(DESTDIR)$(PREFIX)/include/tfvm.h
	install -m 644 include/tfvm_debug.h $(DESTDIR)$(PREFIX)/include/tfvm_debug.h
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(shell sed -n 's/^#define TFVM_VERSION_STRING "\(.*\)"/\1/p' include/tfvm.h)|' \
	    tfvm.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/tfvm.pc

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/tfvm $(DESTDIR)$(PREFIX)/lib/libtfvm.* $(DESTDIR)$(PREFIX)/lib/libtfvm_cuda.so \
	      $(DESTDIR)$(PREFIX)/include/tfvm.h $(DESTDIR)$(PREFIX)/include/tfvm_debug.h $(DESTDIR)$(PREFIX)/lib/pkgconfig/tfvm.pc

clean:
	rm -rf build python/build python/tfvm.egg-info

-include $(DEPS)
