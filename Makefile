# tfvm — one hand-written Makefile.
#   make            build/bin/tfvm, build/lib/libtfvm.a, build/lib/libtfvm.so
#   make test       build and run every test (unit suites + end-to-end)
#   make asan       the whole test suite under AddressSanitizer + UBSan
#   make tsan       scheduler and VM tests under ThreadSanitizer
#   make fuzz       libFuzzer on the loader, assembler and .npy reader (FUZZ_SECONDS each)
#   make fuzz-compiler  differential test of the compiler on FUZZ_N random programs
#   make install    PREFIX=/usr/local (DESTDIR honoured)
#   make bench      benchmarks (ratios against references run in the same run)

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
CPPFLAGS_ALL := -I. -Iinclude -D_GNU_SOURCE
CFLAGS_ALL   := -std=c11 $(WARN) $(CFLAGS) -fPIC -fvisibility=hidden -pthread
LDLIBS_ALL   := $(shell pkg-config --libs hwloc 2>/dev/null || echo -lhwloc) -pthread -lm

ifneq ($(SAN),)
CFLAGS_ALL += -fsanitize=$(SAN) -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS    += -fsanitize=$(SAN)
endif

LIB_DIRS := util isa loader compiler vm scheduler devices devices/cpu
LIB_SRC  := $(foreach d,$(LIB_DIRS),$(wildcard $(d)/*.c))
CLI_SRC  := $(wildcard tools/*.c)
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
DEPS     := $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d)

TFVM     := $(BUILD)/bin/tfvm
LIBA     := $(BUILD)/lib/libtfvm.a
LIBSO    := $(BUILD)/lib/libtfvm.so

CHECK_CFLAGS := $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS   := $(shell pkg-config --libs check 2>/dev/null)
UNIT_SRC := $(wildcard test/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:test/unit/%.c=$(BUILD)/test/%)

.PHONY: all test unit e2e asan tsan fuzz fuzz-compiler install uninstall clean bench check-deps
all: $(TFVM) $(LIBA) $(LIBSO)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS_ALL) $(CPPFLAGS) $(CFLAGS_ALL) -MMD -MP -c $< -o $@

$(LIBA): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

$(LIBSO): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,libtfvm.so.0 $(LDFLAGS) -o $@ $^ $(LDLIBS_ALL)

$(TFVM): $(CLI_OBJ) $(LIBA)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(LIBA) $(LDLIBS_ALL)

$(BUILD)/test/%: test/unit/%.c test/unit/testutil.h $(LIBA)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS_ALL) $(CHECK_CFLAGS) $(CFLAGS_ALL) -fvisibility=default -o $@ $< $(LIBA) $(CHECK_LIBS) $(LDLIBS_ALL)

check-deps:
	@pkg-config --exists check || { echo "make: the unit tests need Check (apt-get install check)"; exit 1; }

# Unit suites run from the repository root so fixtures are found by path.
# CK_FORK=no under ASan keeps leak reports attached to the failing test.
# The suites run one after another (even under -j) so their output reads in order.
RUN_UNIT = set -e; for t in $(UNIT_BIN); do echo "== $$t"; $$t; done
RUN_E2E  = TFVM=$(TFVM) BUILD=$(BUILD) SAN=$(SAN) bash test/e2e/run.sh

unit: check-deps $(UNIT_BIN)
	@$(RUN_UNIT)

e2e: all
	@$(RUN_E2E)

test: check-deps all $(UNIT_BIN)
	@$(RUN_UNIT)
	@$(RUN_E2E)
	@echo "make test: all suites passed ($(BUILD))"

asan:
	$(MAKE) BUILD=build/asan SAN=address,undefined OPT=-O1 test

tsan:
	$(MAKE) BUILD=build/tsan SAN=thread OPT=-O1 unit

# Each target: test/fuzz/fuzz_NAME.c, dictionary test/fuzz/NAME.dict (if any),
# seeds: .tfvm files, .tfasm examples, NumPy-made .npy fixtures. FUZZ_SECONDS each.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= loader asm npy
FUZZ_CFLAGS  := $(CPPFLAGS_ALL) -std=c11 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
	    mkdir -p build/fuzz/corpus-$$t; \
	    echo "== fuzz $$t ($(FUZZ_SECONDS) s)"; \
	    clang $(FUZZ_CFLAGS) -o build/fuzz/fuzz_$$t test/fuzz/fuzz_$$t.c $(LIB_SRC) $(LDLIBS_ALL); \
	    dict=; [ -f test/fuzz/$$t.dict ] && dict=-dict=test/fuzz/$$t.dict; \
	    case $$t in loader) seeds=test/fuzz/seeds;; asm) seeds="examples/asm test/fuzz/asm_seeds";; npy) seeds=test/data/npy;; *) seeds=;; esac; \
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

bench: all
	@TFVM=$(TFVM) CC=$(CC) bash bench/run.sh
	@TFVM=$(TFVM) bash bench/sched.sh

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 755 $(TFVM) $(DESTDIR)$(PREFIX)/bin/tfvm
	install -m 644 $(LIBA) $(DESTDIR)$(PREFIX)/lib/libtfvm.a
	install -m 755 $(LIBSO) $(DESTDIR)$(PREFIX)/lib/libtfvm.so.0
	ln -sf libtfvm.so.0 $(DESTDIR)$(PREFIX)/lib/libtfvm.so
	install -m 644 include/tfvm.h $(DESTDIR)$(PREFIX)/include/tfvm.h
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(shell sed -n 's/^#define TFVM_VERSION_STRING "\(.*\)"/\1/p' include/tfvm.h)|' \
	    tfvm.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/tfvm.pc

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/tfvm $(DESTDIR)$(PREFIX)/lib/libtfvm.* \
	      $(DESTDIR)$(PREFIX)/include/tfvm.h $(DESTDIR)$(PREFIX)/lib/pkgconfig/tfvm.pc

clean:
	rm -rf build

-include $(DEPS)
