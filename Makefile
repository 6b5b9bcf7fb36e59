# convd — hand-written Makefile.
#   make            daemon, client library, tools (CPU only, no GPU toolchain)
#   make SAN=1      the same with AddressSanitizer + UndefinedBehaviorSanitizer
#   make TSAN=1     the same with ThreadSanitizer (build-tsan/; kernels single-threaded)
#   make test       build, then run every test (C unit tests and integration)
#   make check-deps fail on an #include that goes upward (scripts/check-deps.py)
#   make GPU=hip    also build the HIP backend plugin (see docs/GPU.md)
#   make V=1        show full command lines
#   make install    install under PREFIX (/usr/local), staged under DESTDIR;
#                   make uninstall removes exactly that (see "install" below)
#
# Sources are picked up by folder: a new .c file in a folder joins the library
# of that folder without editing this file.

CC      ?= gcc
PYTHON  ?= python3
BUILD   ?= build
SAN     ?= 0
TSAN    ?= 0
DEBUG   ?= 0

ifeq ($(SAN),1)
BUILD   := build-san
endif
ifeq ($(TSAN),1)
BUILD   := build-tsan
endif

CPPFLAGS += -I. -I$(BUILD)/gen -D_GNU_SOURCE -MMD -MP
CFLAGS   ?= -O2
CFLAGS   += -std=c11 -g -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers \
            -fPIC -pthread
LDFLAGS  += -pthread
# Kernels parallelise with OpenMP: oneDNN (Debian's build) already runs on it,
# so one runtime owns the cores.
OMP_FLAGS := -fopenmp
LDLIBS   += -lm

ifeq ($(DEBUG),1)
CFLAGS   += -O0
endif
ifeq ($(SAN),1)
CFLAGS   += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS  += -fsanitize=address,undefined
endif
# ThreadSanitizer, for the daemon's own threads (loop, workers, loader). It
# cannot see libgomp's barriers (futexes in an uninstrumented library), so
# every OpenMP team would be reported as racing with itself: our kernels are
# built without -fopenmp here (the pragmas are ignored: one thread each) and
# only link libgomp for the omp_* calls; oneDNN keeps its own OpenMP team,
# whose accesses tests/support/tsan.supp keeps out of the reports.
ifeq ($(TSAN),1)
CFLAGS   += -fsanitize=thread -fno-omit-frame-pointer -Wno-unknown-pragmas
LDFLAGS  += -fsanitize=thread
OMP_FLAGS :=
LDLIBS   += -lgomp
endif

# Kernel files that need a specific ISA carry it in their name; the rest stay
# portable so the binaries run on any x86-64.
$(BUILD)/obj/%-avx512f.o: CFLAGS += -mavx512f -mavx512vl -mavx512bw -mavx512dq -mfma
$(BUILD)/obj/%-avx2.o:    CFLAGS += -mavx2 -mfma
$(BUILD)/obj/%-avx512vnni.o: CFLAGS += -mavx512f -mavx512vl -mavx512bw -mavx512dq -mavx512vnni -mfma

ifeq ($(V),1)
Q :=
else
Q := @
endif

UV_LIBS      := $(shell pkg-config --libs libuv 2>/dev/null || echo -luv)
MSGPACK_LIBS := -lmsgpackc
PBC_LIBS     := -lprotobuf-c
DNNL_LIBS    := -ldnnl
ONNX_PROTO   ?= /usr/include/onnx/onnx.proto

# ---- sources by layer -------------------------------------------------------
# core/: the base layer every other one may use; its objects go into every
# library (the client library too: it needs the error table).
CORE_SRC    := $(wildcard core/*.c)
PROTO_SRC   := $(wildcard proto/*.c)
CLIENT_SRC  := $(wildcard client/*.c)
RUNTIME_SRC := $(wildcard runtime/*.c) $(BUILD)/gen/onnx.pb-c.c
KERNEL_SRC  := $(wildcard kernels/*.c kernels/cpu/*.c) $(wildcard sparse/*.c)
# The backends the runtime links: the interface, the CPU backend, and the
# loader of the HIP plugin (the HIP backend itself: see the HIP section).
BACKEND_SRC := $(wildcard backends/*.c backends/cpu/*.c) backends/hip/plugin-loader.c
# The settings table is generated from daemon/settings.toml (see below).
SETTINGS_TABLE := $(BUILD)/gen/daemon/settings-table.c
DAEMON_SRC  := $(filter-out daemon/main.c,$(wildcard daemon/*.c)) $(SETTINGS_TABLE)
CONVCTL_SRC := $(wildcard tools/convctl/*.c)
BENCH_SRC   := $(wildcard tools/convbench/*.c)
TESTLIB_SRC := $(wildcard tests/unit/*.c)

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(patsubst $(BUILD)/%,%,$(1)))

CORE_OBJ    := $(call obj,$(CORE_SRC))
PROTO_OBJ   := $(call obj,$(PROTO_SRC))
CLIENT_OBJ  := $(call obj,$(CLIENT_SRC))
RUNTIME_OBJ := $(call obj,$(RUNTIME_SRC))
KERNEL_OBJ  := $(call obj,$(KERNEL_SRC))
BACKEND_OBJ := $(call obj,$(BACKEND_SRC))
DAEMON_OBJ  := $(call obj,$(DAEMON_SRC))
CONVCTL_OBJ := $(call obj,$(CONVCTL_SRC))
BENCH_OBJ   := $(call obj,$(BENCH_SRC))
TEST_OBJ    := $(call obj,$(TESTLIB_SRC))

$(RUNTIME_OBJ) $(KERNEL_OBJ) $(BACKEND_OBJ) $(TEST_OBJ): CFLAGS += $(OMP_FLAGS)

LIB_PROTO   := $(BUILD)/lib/libcdproto.a
LIB_RUNTIME := $(BUILD)/lib/libcdruntime.a
LIB_DAEMON  := $(BUILD)/lib/libcddaemon.a
LIB_CLIENT  := $(BUILD)/lib/libconvd.a
SO_CLIENT   := $(BUILD)/lib/libconvd.so

RUNTIME_LIBS := $(LIB_RUNTIME) $(PBC_LIBS) $(DNNL_LIBS) $(OMP_FLAGS)

RUN_SRC        := $(wildcard tools/convd-run/*.c) $(wildcard tools/common/*.c)
CLIENTTEST_SRC := $(wildcard tests/client/*.c) tests/unit/main.c
RUN_OBJ        := $(call obj,$(RUN_SRC))
CLIENTTEST_OBJ := $(call obj,$(CLIENTTEST_SRC))
TOOLS_COMMON_OBJ := $(call obj,$(wildcard tools/common/*.c))

BINS := $(BUILD)/bin/convd $(BUILD)/bin/convctl $(BUILD)/bin/cd-tests
ifneq ($(BENCH_SRC),)
BINS += $(BUILD)/bin/convbench
endif
ifneq ($(wildcard tools/convd-run/*.c),)
BINS += $(BUILD)/bin/convd-run
endif
ifneq ($(wildcard tests/client/*.c),)
BINS += $(BUILD)/bin/cd-client-tests
endif

all: $(BINS) $(LIB_CLIENT) $(SO_CLIENT)

# Generated protobuf-c code for ONNX, from the onnx.proto Debian ships.
$(BUILD)/gen/onnx.pb-c.c $(BUILD)/gen/onnx.pb-c.h: $(ONNX_PROTO)
	@mkdir -p $(BUILD)/gen
	@echo "  PROTOC  onnx.proto"
	$(Q)protoc-c --c_out=$(BUILD)/gen -I$(dir $(ONNX_PROTO)) $(ONNX_PROTO)

$(BUILD)/obj/gen/onnx.pb-c.o: $(BUILD)/gen/onnx.pb-c.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -w -c $< -o $@

# The daemon's settings table, from its data file: the script checks the
# data (names, types, flags, ranges, choices) and fails naming the setting.
$(SETTINGS_TABLE): daemon/settings.toml scripts/gen-settings-table.py
	@echo "  GEN     $@"
	$(Q)$(PYTHON) scripts/gen-settings-table.py daemon/settings.toml $@

$(BUILD)/obj/gen/daemon/settings-table.o: $(SETTINGS_TABLE)
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

# The project's one version: the VERSION file, as CD_VERSION for the C code
# (daemon/version.h, client/, tools/). Rewritten only when VERSION changes.
VERSION_FILE := VERSION
CD_VERSION   := $(shell cat $(VERSION_FILE))
VERSION_H    := $(BUILD)/gen/convd-version.h

$(VERSION_H): $(VERSION_FILE)
	@mkdir -p $(dir $@)
	@echo "  GEN     $@"
	$(Q)printf '// Generated from VERSION by the Makefile: do not edit.\n#define CD_VERSION "%s"\n' \
	    "$(CD_VERSION)" > $@

# Runtime sources include the generated header.
$(RUNTIME_OBJ) $(TEST_OBJ) $(CONVCTL_OBJ): | $(BUILD)/gen/onnx.pb-c.h

$(BUILD)/obj/%.o: %.c | $(VERSION_H)
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(LIB_PROTO): $(CORE_OBJ) $(PROTO_OBJ)
	@mkdir -p $(dir $@)
	@echo "  AR      $@"
	$(Q)rm -f $@ && ar rcs $@ $^

$(LIB_RUNTIME): $(RUNTIME_OBJ) $(BACKEND_OBJ) $(KERNEL_OBJ) $(CORE_OBJ)
	@mkdir -p $(dir $@)
	@echo "  AR      $@"
	$(Q)rm -f $@ && ar rcs $@ $^

$(LIB_DAEMON): $(DAEMON_OBJ)
	@mkdir -p $(dir $@)
	@echo "  AR      $@"
	$(Q)rm -f $@ && ar rcs $@ $^

# libconvd: the client, the wire code and core/; never the runtime.
$(LIB_CLIENT): $(CLIENT_OBJ) $(PROTO_OBJ) $(CORE_OBJ)
	@mkdir -p $(dir $@)
	@echo "  AR      $@"
	$(Q)rm -f $@ && ar rcs $@ $^

# The shared library carries the soname libconvd.so.$(SO_MAJOR): the major
# number changes only when the ABI of client/convd.h breaks. The file is
# libconvd.so.VERSION, with libconvd.so.$(SO_MAJOR) and libconvd.so links.
SO_MAJOR := 0
SO_REAL  := $(BUILD)/lib/libconvd.so.$(CD_VERSION)

$(SO_REAL): $(CLIENT_OBJ) $(PROTO_OBJ) $(CORE_OBJ) client/libconvd.map
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) -shared $(LDFLAGS) -Wl,-soname,libconvd.so.$(SO_MAJOR) -Wl,--version-script=client/libconvd.map \
	    -o $@ $(CLIENT_OBJ) $(PROTO_OBJ) $(CORE_OBJ) $(MSGPACK_LIBS) $(LDLIBS)

$(SO_CLIENT): $(SO_REAL)
	$(Q)ln -sfn libconvd.so.$(CD_VERSION) $(BUILD)/lib/libconvd.so.$(SO_MAJOR)
	$(Q)ln -sfn libconvd.so.$(SO_MAJOR) $@

$(BUILD)/bin/convd: $(BUILD)/obj/daemon/main.o $(LIB_DAEMON) $(LIB_RUNTIME) $(LIB_PROTO)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(LIB_DAEMON) $(RUNTIME_LIBS) $(LIB_PROTO) $(UV_LIBS) $(MSGPACK_LIBS) $(LDLIBS)

$(BUILD)/bin/convctl: $(CONVCTL_OBJ) $(TOOLS_COMMON_OBJ) $(LIB_CLIENT) $(LIB_RUNTIME)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $(CONVCTL_OBJ) $(TOOLS_COMMON_OBJ) $(LIB_CLIENT) $(RUNTIME_LIBS) $(MSGPACK_LIBS) $(LDLIBS)

$(BUILD)/bin/convbench: $(BENCH_OBJ) $(LIB_CLIENT)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $(BENCH_OBJ) $(LIB_CLIENT) $(MSGPACK_LIBS) $(LDLIBS)

# convd-run: loads an ONNX file in-process and runs it (.npy in/out, timing).
$(BUILD)/bin/convd-run: $(RUN_OBJ) $(LIB_RUNTIME) $(LIB_PROTO)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $(RUN_OBJ) $(RUNTIME_LIBS) $(LIB_PROTO) $(MSGPACK_LIBS) $(LDLIBS)

# C client tests link libconvd alone: proof that the client needs no runtime.
$(BUILD)/bin/cd-client-tests: $(CLIENTTEST_OBJ) $(LIB_CLIENT)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $(CLIENTTEST_OBJ) $(LIB_CLIENT) $(MSGPACK_LIBS) $(LDLIBS)

# One binary holds every C unit test; tests/run-c runs each one forked.
$(BUILD)/bin/cd-tests: $(TEST_OBJ) $(LIB_DAEMON) $(LIB_RUNTIME) $(LIB_CLIENT) $(LIB_PROTO)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $(TEST_OBJ) $(LIB_DAEMON) $(RUNTIME_LIBS) $(LIB_CLIENT) $(UV_LIBS) $(MSGPACK_LIBS) $(LDLIBS)

# cd-tests also runs the unit tests of convbench's histogram and arrival
# processes (tests/unit/test-bench-*.c).
BENCH_TESTED_OBJ := $(call obj,$(wildcard tools/convbench/hist.c tools/convbench/arrival.c))
$(BUILD)/bin/cd-tests: $(BENCH_TESTED_OBJ)
$(BUILD)/bin/cd-tests: LDLIBS += $(BENCH_TESTED_OBJ)

# ==== HIP ====================================================================
# The same backends/hip sources are built twice:
#  - emulated, always: every *.hip is compiled as plain C++ by $(CXX) against
#    the project's CPU emulator of the HIP execution model (backends/hip/emu/),
#    the host .c files by $(CC); archived in libcdhipemu.a and linked into
#    cd-tests, so every `make test` executes the kernels. Needs no ROCm.
#  - real, with `make GPU=hip`: *.hip by hipcc for every target in GPU_ARCHS,
#    the host .c files of backends/hip and backends/hip/sparse by $(CC) with
#    -D__HIP_PLATFORM_AMD__, linked into $(BUILD)/lib/libconvd-hip.so, the
#    plugin the daemon dlopens for --device hip (exports: backends/hip/plugin.map).
# docs/GPU.md says what each build verifies.
HIPCC     ?= hipcc
GPU       ?=
GPU_ARCHS ?= gfx906,gfx908,gfx90a,gfx1030
hip_comma := ,
HIP_OFFLOAD := $(foreach a,$(subst $(hip_comma), ,$(GPU_ARCHS)),--offload-arch=$(a))

HIP_SRC      := $(wildcard backends/hip/*.hip)
HIP_HOST_SRC := $(filter-out backends/hip/plugin-loader.c,$(wildcard backends/hip/*.c))
HIPEMU_SRC   := $(wildcard backends/hip/emu/*.cpp)
HIPEMU_OBJ   := $(patsubst %.hip,$(BUILD)/obj/hip-emu/%.o,$(HIP_SRC)) \
                $(patsubst %.cpp,$(BUILD)/obj/hip-emu/%.o,$(HIPEMU_SRC)) \
                $(patsubst %.c,$(BUILD)/obj/hip-emu/%.o,$(HIP_HOST_SRC)) \
                $(BUILD)/obj/hip-emu/backends/hip/sparse/gebsr-pack.o
LIB_HIPEMU   := $(BUILD)/lib/libcdhipemu.a
# What a binary adds to its link line to run HIP kernels under emulation.
HIPEMU_LIBS  := $(LIB_HIPEMU) $(OMP_FLAGS)
HIPTEST_OBJ  := $(patsubst %.cpp,$(BUILD)/obj/%.o,$(wildcard tests/unit/test-hip-*.cpp))

HIPEMU_CXXFLAGS := -std=c++17 -O2 -g -Wall -Wextra -Wno-unused-parameter \
                   -Wno-missing-field-initializers -fPIC -pthread -fno-exceptions -fno-rtti \
                   $(OMP_FLAGS)
ifeq ($(DEBUG),1)
HIPEMU_CXXFLAGS += -O0
endif
ifeq ($(SAN),1)
HIPEMU_CXXFLAGS += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
endif
ifeq ($(TSAN),1)
HIPEMU_CXXFLAGS += -fsanitize=thread -fno-omit-frame-pointer -Wno-unknown-pragmas
endif

$(BUILD)/obj/hip-emu/%.o: %.hip
	@mkdir -p $(dir $@)
	@echo "  CXX     $< (hip-emu)"
	$(Q)$(CXX) $(CPPFLAGS) $(HIPEMU_CXXFLAGS) -x c++ -c $< -o $@

$(BUILD)/obj/hip-emu/%.o: %.cpp
	@mkdir -p $(dir $@)
	@echo "  CXX     $<"
	$(Q)$(CXX) $(CPPFLAGS) $(HIPEMU_CXXFLAGS) -c $< -o $@

$(BUILD)/obj/hip-emu/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $< (hip-emu)"
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(OMP_FLAGS) -c $< -o $@

$(HIPTEST_OBJ): $(BUILD)/obj/%.o: %.cpp
	@mkdir -p $(dir $@)
	@echo "  CXX     $<"
	$(Q)$(CXX) $(CPPFLAGS) $(HIPEMU_CXXFLAGS) -c $< -o $@

$(LIB_HIPEMU): $(HIPEMU_OBJ)
	@mkdir -p $(dir $@)
	@echo "  AR      $@"
	$(Q)rm -f $@ && ar rcs $@ $^

# cd-tests runs the HIP kernels under emulation (tests/unit/test-hip-*).
$(BUILD)/bin/cd-tests: $(HIPTEST_OBJ) $(LIB_HIPEMU)
$(BUILD)/bin/cd-tests: LDLIBS += $(HIPTEST_OBJ) $(HIPEMU_LIBS)

# The runtime creates the hip-emu backend (backends/hip/backend-hip.c over the
# emulator) for the device "hip-emu", so every binary that links the runtime
# links the emulated kernels too (no ROCm: the real backend is the plugin).
RUNTIME_LIBS += $(HIPEMU_LIBS)
$(BUILD)/bin/convd $(BUILD)/bin/convctl $(BUILD)/bin/convd-run: $(LIB_HIPEMU)

# Dense vs sparse conv layers on a HIP device through the backend vtable
# (bench/gpu-check runs it with --device hip:N; --device hip-emu --quick
# exercises it on any machine).
$(BUILD)/bin/hip-layers: $(BUILD)/obj/bench/hip-layers.o $(LIB_RUNTIME) $(LIB_HIPEMU) $(LIB_PROTO)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(RUNTIME_LIBS) $(LIB_PROTO) $(LDLIBS)

bench: $(BUILD)/bin/hip-layers

ifeq ($(GPU),hip)
HIP_PLUGIN   := $(BUILD)/lib/libconvd-hip.so
HIP_REAL_OBJ := $(patsubst %.hip,$(BUILD)/obj/hip-real/%.o,$(HIP_SRC)) \
                $(patsubst %.c,$(BUILD)/obj/hip-real/%.o,$(HIP_HOST_SRC) $(wildcard backends/hip/sparse/*.c) \
                core/errors.c core/log.c)
# The plugin is loaded into any daemon (also a sanitizer build): no
# sanitizers, hidden symbols but for the plugin entry points.
HIPCC_FLAGS  := -std=c++17 -O2 -g -Wall -Wextra -Wno-unused-parameter -fPIC \
                -fvisibility=hidden $(HIP_OFFLOAD)
HIP_HOST_CFLAGS := -std=c11 -O2 -g -Wall -Wextra -Wno-unused-parameter \
                   -Wno-missing-field-initializers -fPIC -pthread -fvisibility=hidden \
                   -D__HIP_PLATFORM_AMD__ -DCD_GPU_ARCHS='"$(GPU_ARCHS)"'

$(BUILD)/obj/hip-real/%.o: %.hip
	@mkdir -p $(dir $@)
	@echo "  HIPCC   $< ($(GPU_ARCHS))"
	$(Q)$(HIPCC) $(CPPFLAGS) $(HIPCC_FLAGS) -c $< -o $@

$(BUILD)/obj/hip-real/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $< (hip)"
	$(Q)$(CC) $(CPPFLAGS) $(HIP_HOST_CFLAGS) -c $< -o $@

$(HIP_PLUGIN): $(HIP_REAL_OBJ) backends/hip/plugin.map
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(HIPCC) -shared $(HIP_OFFLOAD) -o $@ $(HIP_REAL_OBJ) \
	    -Wl,--version-script=backends/hip/plugin.map -Wl,-z,defs -lrocsparse -lamdhip64 -pthread

all: $(HIP_PLUGIN)
endif
# ==== end of HIP ===============================================================

# The whole suite: C unit tests (each forked, with a timeout) and the
# integration tests (real daemon, real socket), all driven by pytest; on an
# AVX-512 CPU tests/run adds a pass of the kernel and model tests capped at
# AVX2, and ends with one line adding up both passes.
# Benchmarks (not part of `make all`): `make bench`. Each program in bench/
# gets its own link line below and joins the bench target.
$(BUILD)/obj/bench/%.o: CFLAGS += $(OMP_FLAGS)

# Dense conv kernels: oneDNN layouts vs im2col + OpenBLAS sgemm (OpenBLAS is
# used by this benchmark only, never by the product).
# (every CPU backend file but the backend itself: the oneDNN wrappers call our
# own loops beside them, e.g. gemv-avx512f.c)
CPUKERNEL_OBJ := $(call obj,$(wildcard kernels/*.c kernels/cpu/*.c) $(filter-out backends/cpu/backend-cpu.c backends/cpu/backend-cpu-choose.c,$(wildcard backends/cpu/*.c)))
$(BUILD)/bin/conv-dense-layers: $(BUILD)/obj/bench/conv-dense-layers.o $(CPUKERNEL_OBJ) $(call obj,$(wildcard sparse/*.c) $(CORE_SRC) runtime/options.c)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(DNNL_LIBS) $(OMP_FLAGS) -lopenblas $(LDLIBS)

bench: $(BUILD)/bin/conv-dense-layers

# Winograd 3x3 vs oneDNN's direct conv on ResNet's 3x3 layers (bench/winograd-layers.c).
$(BUILD)/bin/winograd-layers: $(BUILD)/obj/bench/winograd-layers.o $(CPUKERNEL_OBJ) $(call obj,$(wildcard sparse/*.c) $(CORE_SRC) runtime/options.c)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(DNNL_LIBS) $(OMP_FLAGS) $(LDLIBS)

bench: $(BUILD)/bin/winograd-layers

# The core's float32 FMA throughput (bench/fma-peak.c): the physical cap the
# dense-model tables quote.
$(BUILD)/bin/fma-peak: bench/fma-peak.c
	@mkdir -p $(dir $@)
	@echo "  CC      $@"
	$(Q)$(CC) -O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -I. -o $@ $<

bench: $(BUILD)/bin/fma-peak

# Sparse conv kernels vs oneDNN dense (bench/sparse-conv-layers.sh writes the
# "Sparse conv kernels" table of bench/results/sparse-conv-layers.md).
$(BUILD)/bin/sparse-conv-layers: $(BUILD)/obj/bench/sparse-conv-layers.o $(call obj,$(wildcard sparse/*.c)) $(call obj,kernels/op-desc.c kernels/cpu/ref-conv.c $(CORE_SRC) runtime/options.c)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(DNNL_LIBS) $(OMP_FLAGS) $(LDLIBS)

bench: $(BUILD)/bin/sparse-conv-layers

# Per-image time of the sparse kernels at batch 1 vs batch N, CPU time
# (bench/results/sparse-batch.md).
$(BUILD)/bin/sparse-batch-layers: $(BUILD)/obj/bench/sparse-batch-layers.o $(call obj,$(wildcard sparse/*.c)) $(call obj,kernels/op-desc.c $(CORE_SRC) runtime/options.c)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(OMP_FLAGS) $(LDLIBS)

bench: $(BUILD)/bin/sparse-batch-layers

# The CSR micro-kernel on one 1x1 layer, one image's plane against a batch
# folded into one plane (bench/spmm-fold.c): the most a fold can gain.
$(BUILD)/bin/spmm-fold: $(BUILD)/obj/bench/spmm-fold.o $(call obj,$(wildcard sparse/*.c)) $(call obj,kernels/op-desc.c $(CORE_SRC))
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(OMP_FLAGS) $(LDLIBS)

bench: $(BUILD)/bin/spmm-fold

# Int8 vs f32 sparse conv on ResNet-50's shapes, per ISA level.
$(BUILD)/bin/sparse-i8-layers: $(BUILD)/obj/bench/sparse-i8-layers.o $(call obj,$(wildcard sparse/*.c)) $(call obj,kernels/op-desc.c $(CORE_SRC))
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(OMP_FLAGS) $(LDLIBS)

bench: $(BUILD)/bin/sparse-i8-layers

# f32 vs int8 conv on oneDNN, the primitives alone (bench/dnnl-int8-layers.sh).
$(BUILD)/bin/dnnl-int8-layers: $(BUILD)/obj/bench/dnnl-int8-layers.o
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(DNNL_LIBS) $(LDLIBS)

bench: $(BUILD)/bin/dnnl-int8-layers

# oneDNN's int8 1x1 convs with a dst zero point against the zero point in
# the bias (backends/cpu/dnnl-conv-int8.c zp_in_bias).
$(BUILD)/bin/dnnl-int8-dst-zp: $(BUILD)/obj/bench/dnnl-int8-dst-zp.o
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(DNNL_LIBS) $(LDLIBS)

bench: $(BUILD)/bin/dnnl-int8-dst-zp

# The same program against another oneDNN installed under ONEDNN_PREFIX
# (include/, lib/; e.g. PyPI's onednn + onednn-devel in a private venv, see
# bench/results/onednn-versions.md). Never part of the product's build. DT_RPATH
# (not RUNPATH) so that its own dependencies (TBB, SYCL) resolve there too.
$(BUILD)/bin/dnnl-int8-layers-alt: bench/dnnl-int8-layers.c
	@test -n "$(ONEDNN_PREFIX)" || { echo "set ONEDNN_PREFIX"; exit 1; }
	@mkdir -p $(dir $@)
	@echo "  CC      $@ ($(ONEDNN_PREFIX))"
	$(Q)$(CC) -O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -I$(ONEDNN_PREFIX)/include -o $@ $< \
		-L$(ONEDNN_PREFIX)/lib -Wl,--disable-new-dtags,-rpath,$(ONEDNN_PREFIX)/lib -ldnnl

bench-onednn-alt: $(BUILD)/bin/dnnl-int8-layers-alt

# Unix-socket ping-pong between two processes, and the same blocking loop
# against convd (bench/overhead.py: bench/results/serving.md).
$(BUILD)/bin/pingpong: $(BUILD)/obj/bench/pingpong.o
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(MSGPACK_LIBS) $(LDLIBS)

bench: $(BUILD)/bin/pingpong

test: all
	CONVD_BUILD=$(BUILD) PYTHON=$(PYTHON) tests/run

# The one direction of calls: fails on an #include that goes upward
# (scripts/check-deps.py holds the table; tests/test_layers.py runs it too).
check-deps:
	$(Q)$(PYTHON) scripts/check-deps.py

# libFuzzer targets (need clang; never part of `make`; CI runs
# `make fuzz SECONDS=60`). `make fuzz` builds every one; `make fuzz SECONDS=N`
# also runs each for N seconds in turn, new inputs going to
# $(BUILD)/fuzz/<target>/ (seeds: tests/fuzz/make-corpus.py writes them,
# never committed; tests/fuzz/corpus holds a few hand-made RPC ones). A crash
# is written as $(BUILD)/fuzz/crash-* and fails the make.
#   fuzz-rpc-reader   the wire: proto/'s reader and codecs, the daemon's request validation
#   fuzz-onnx-load    ONNX import, lowering, compaction and planning on a stub backend
FUZZ_CC ?= clang
FUZZ_FLAGS := -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I. -D_GNU_SOURCE
FUZZ_TARGETS := $(BUILD)/bin/fuzz-rpc-reader $(BUILD)/bin/fuzz-onnx-load
SECONDS ?=
fuzz: $(FUZZ_TARGETS)
ifneq ($(SECONDS),)
	@mkdir -p $(BUILD)/fuzz/rpc-reader $(BUILD)/fuzz/onnx-load $(BUILD)/fuzz/onnx-seeds $(BUILD)/fuzz/rpc-seeds
	$(PYTHON) tests/fuzz/make-corpus.py $(BUILD)/fuzz/onnx-seeds
	$(PYTHON) tests/fuzz/make-corpus.py --rpc $(BUILD)/fuzz/rpc-seeds
	$(BUILD)/bin/fuzz-rpc-reader -max_total_time=$(SECONDS) -print_final_stats=1 \
	    -artifact_prefix=$(BUILD)/fuzz/crash-rpc-reader- $(BUILD)/fuzz/rpc-reader $(BUILD)/fuzz/rpc-seeds tests/fuzz/corpus
	$(BUILD)/bin/fuzz-onnx-load -max_total_time=$(SECONDS) -print_final_stats=1 -rss_limit_mb=4096 -dict=tests/fuzz/onnx.dict \
	    -artifact_prefix=$(BUILD)/fuzz/crash-onnx-load- $(BUILD)/fuzz/onnx-load $(BUILD)/fuzz/onnx-seeds
endif

# The wire target: proto/ and the daemon's request validation, no server.
# Big-message buffers and reply references start at a few bytes here, so
# that small inputs take those paths.
$(BUILD)/bin/fuzz-rpc-reader: tests/fuzz/fuzz-rpc-reader.c $(PROTO_SRC) $(CORE_SRC) daemon/validate.c daemon/stats.c \
    daemon/reply.c
	@mkdir -p $(dir $@)
	@echo "  FUZZ    $@"
	$(Q)$(FUZZ_CC) $(FUZZ_FLAGS) -DCD_RPC_BIG_MESSAGE=96 -DCD_REPLY_REF_MIN=8 -o $@ $^ $(MSGPACK_LIBS)

# The loader's sources as they are, with the kernels the lowering folds with
# (reference loops) and the sparse analysis the compaction records.
FUZZ_ONNX_SRC := tests/fuzz/fuzz-onnx-load.c $(BUILD)/gen/onnx.pb-c.c \
    runtime/onnx-import.c runtime/onnx-file.c runtime/input-shape.c runtime/graph.c $(wildcard runtime/lower*.c) runtime/fuse-patterns.c \
    runtime/compact.c $(wildcard runtime/plan*.c) runtime/arena.c runtime/model-arena.c runtime/options.c backends/backend.c \
    kernels/op-desc.c $(wildcard kernels/cpu/ref*.c) sparse/analysis.c $(CORE_SRC)
$(BUILD)/bin/fuzz-onnx-load: $(FUZZ_ONNX_SRC) | $(BUILD)/gen/onnx.pb-c.h
	@mkdir -p $(dir $@)
	@echo "  FUZZ    $@"
	$(Q)$(FUZZ_CC) $(FUZZ_FLAGS) -I$(BUILD)/gen -fopenmp -w -o $@ $(FUZZ_ONNX_SRC) $(PBC_LIBS) -lm

# ==== install ===================================================================
# `make install [PREFIX=/usr/local] [DESTDIR=stage]`: binaries, libconvd
# (shared, with soname and links, and static), convd.h, convd.pc, the HIP
# plugin when it was built (PLUGINDIR: the daemon finds it at
# <bindir>/../lib/convd/), man pages, systemd units with their sysusers.d
# and tmpfiles.d files, bash completion for convctl, the example config.
# dist/install.sh does the work and records every file it writes in
# $(DATADIR)/convd/install-manifest; `make uninstall` (same PREFIX and
# DESTDIR) removes what the manifest lists. docs/OPERATIONS.md, "Installing".
PREFIX       ?= /usr/local
DESTDIR      ?=
BINDIR       ?= $(PREFIX)/bin
LIBDIR       ?= $(PREFIX)/lib
INCLUDEDIR   ?= $(PREFIX)/include
DATADIR      ?= $(PREFIX)/share
MANDIR       ?= $(DATADIR)/man
DOCDIR       ?= $(DATADIR)/doc/convd
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
PLUGINDIR    ?= $(LIBDIR)/convd
BASHCOMPDIR  ?= $(DATADIR)/bash-completion/completions
# systemd's own search paths: /usr/lib/systemd/... for PREFIX=/usr, else
# under the prefix (/usr/local/lib/systemd/system is searched too).
UNITDIR      ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR  ?= $(PREFIX)/lib/sysusers.d
TMPFILESDIR  ?= $(PREFIX)/lib/tmpfiles.d
ifeq ($(PREFIX),/usr)
SYSCONFDIR   ?= /etc
else
SYSCONFDIR   ?= $(PREFIX)/etc
endif

INSTALL_ENV = BUILD='$(BUILD)' PREFIX='$(PREFIX)' DESTDIR='$(DESTDIR)' BINDIR='$(BINDIR)' \
    LIBDIR='$(LIBDIR)' INCLUDEDIR='$(INCLUDEDIR)' DATADIR='$(DATADIR)' MANDIR='$(MANDIR)' \
    DOCDIR='$(DOCDIR)' PKGCONFIGDIR='$(PKGCONFIGDIR)' PLUGINDIR='$(PLUGINDIR)' \
    BASHCOMPDIR='$(BASHCOMPDIR)' UNITDIR='$(UNITDIR)' SYSUSERSDIR='$(SYSUSERSDIR)' \
    TMPFILESDIR='$(TMPFILESDIR)' SYSCONFDIR='$(SYSCONFDIR)' VERSION='$(CD_VERSION)' \
    SO_MAJOR='$(SO_MAJOR)'

install: all
	$(Q)$(INSTALL_ENV) dist/install.sh install

uninstall:
	$(Q)$(INSTALL_ENV) dist/install.sh uninstall

clean:
	rm -rf build build-san build-tsan

.PHONY: all test clean bench bench-onednn-alt fuzz check-deps install uninstall

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

# MobileNetV2's depthwise layers and FC against their memory and FMA floors
# (bench/dw-layers.c; bench/results/depthwise.md).
$(BUILD)/bin/dw-layers: $(BUILD)/obj/bench/dw-layers.o $(CPUKERNEL_OBJ) $(call obj,$(wildcard sparse/*.c) $(CORE_SRC) runtime/options.c)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(DNNL_LIBS) $(OMP_FLAGS) $(LDLIBS)

bench: $(BUILD)/bin/dw-layers
