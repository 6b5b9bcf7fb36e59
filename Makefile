# convd — hand-written Makefile.
#   make            daemon, client library, tools (CPU only, no GPU toolchain)
#   make SAN=1      the same with AddressSanitizer + UndefinedBehaviorSanitizer
#   make test       build, then run every test (C unit tests and integration)
#   make GPU=hip    also build the HIP backend plugin (see issue/docs)
#   make V=1        show full command lines
#
# Sources are picked up by folder: a new .c file in a folder joins the library
# of that folder without editing this file.

CC      ?= gcc
PYTHON  ?= python3
BUILD   ?= build
SAN     ?= 0
DEBUG   ?= 0

ifeq ($(SAN),1)
BUILD   := build-san
endif

CPPFLAGS += -I. -I$(BUILD)/gen -D_GNU_SOURCE -MMD -MP
CFLAGS   ?= -O2
CFLAGS   += -std=c11 -g -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers \
            -fPIC -pthread
LDFLAGS  += -pthread
LDLIBS   += -lm

ifeq ($(DEBUG),1)
CFLAGS   += -O0
endif
ifeq ($(SAN),1)
CFLAGS   += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS  += -fsanitize=address,undefined
endif

# Kernel files that need a specific ISA carry it in their name; the rest stay
# portable so the binaries run on any x86-64.
$(BUILD)/obj/%-avx512f.o: CFLAGS += -mavx512f -mavx512vl -mavx512bw -mavx512dq -mfma
$(BUILD)/obj/%-avx2.o:    CFLAGS += -mavx2 -mfma

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
PROTO_SRC   := $(wildcard proto/*.c)
CLIENT_SRC  := $(wildcard client/*.c)
RUNTIME_SRC := $(wildcard runtime/*.c) $(BUILD)/gen/onnx.pb-c.c
KERNEL_SRC  := $(wildcard kernels/cpu/*.c) $(wildcard sparse/*.c)
DAEMON_SRC  := $(filter-out daemon/main.c,$(wildcard daemon/*.c))
CONVCTL_SRC := $(wildcard tools/convctl/*.c)
BENCH_SRC   := $(wildcard tools/convbench/*.c)
TESTLIB_SRC := $(wildcard tests/unit/*.c)

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(patsubst $(BUILD)/%,%,$(1)))

PROTO_OBJ   := $(call obj,$(PROTO_SRC))
CLIENT_OBJ  := $(call obj,$(CLIENT_SRC))
RUNTIME_OBJ := $(call obj,$(RUNTIME_SRC))
KERNEL_OBJ  := $(call obj,$(KERNEL_SRC))
DAEMON_OBJ  := $(call obj,$(DAEMON_SRC))
CONVCTL_OBJ := $(call obj,$(CONVCTL_SRC))
BENCH_OBJ   := $(call obj,$(BENCH_SRC))
TEST_OBJ    := $(call obj,$(TESTLIB_SRC))

LIB_PROTO   := $(BUILD)/lib/libcdproto.a
LIB_RUNTIME := $(BUILD)/lib/libcdruntime.a
LIB_DAEMON  := $(BUILD)/lib/libcddaemon.a
LIB_CLIENT  := $(BUILD)/lib/libconvd.a
SO_CLIENT   := $(BUILD)/lib/libconvd.so

RUNTIME_LIBS := $(LIB_RUNTIME) $(PBC_LIBS) $(DNNL_LIBS)

BINS := $(BUILD)/bin/convd $(BUILD)/bin/convctl $(BUILD)/bin/convbench $(BUILD)/bin/cd-tests

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

# Runtime sources include the generated header.
$(RUNTIME_OBJ) $(TEST_OBJ): | $(BUILD)/gen/onnx.pb-c.h

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(LIB_PROTO): $(PROTO_OBJ)
	@mkdir -p $(dir $@)
	@echo "  AR      $@"
	$(Q)rm -f $@ && ar rcs $@ $^

$(LIB_RUNTIME): $(RUNTIME_OBJ) $(KERNEL_OBJ)
	@mkdir -p $(dir $@)
	@echo "  AR      $@"
	$(Q)rm -f $@ && ar rcs $@ $^

$(LIB_DAEMON): $(DAEMON_OBJ)
	@mkdir -p $(dir $@)
	@echo "  AR      $@"
	$(Q)rm -f $@ && ar rcs $@ $^

# libconvd: the client and the wire code; never the runtime.
$(LIB_CLIENT): $(CLIENT_OBJ) $(PROTO_OBJ)
	@mkdir -p $(dir $@)
	@echo "  AR      $@"
	$(Q)rm -f $@ && ar rcs $@ $^

$(SO_CLIENT): $(CLIENT_OBJ) $(PROTO_OBJ)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) -shared $(LDFLAGS) -o $@ $^ $(MSGPACK_LIBS) $(LDLIBS)

$(BUILD)/bin/convd: $(BUILD)/obj/daemon/main.o $(LIB_DAEMON) $(LIB_RUNTIME) $(LIB_PROTO)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(LIB_DAEMON) $(RUNTIME_LIBS) $(LIB_PROTO) $(UV_LIBS) $(MSGPACK_LIBS) $(LDLIBS)

$(BUILD)/bin/convctl: $(CONVCTL_OBJ) $(LIB_CLIENT) $(LIB_RUNTIME)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $(CONVCTL_OBJ) $(LIB_CLIENT) $(RUNTIME_LIBS) $(MSGPACK_LIBS) $(LDLIBS)

$(BUILD)/bin/convbench: $(BENCH_OBJ) $(LIB_CLIENT)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $(BENCH_OBJ) $(LIB_CLIENT) $(MSGPACK_LIBS) $(LDLIBS)

# One binary holds every C unit test; tests/run-c runs each one forked.
$(BUILD)/bin/cd-tests: $(TEST_OBJ) $(LIB_DAEMON) $(LIB_RUNTIME) $(LIB_CLIENT) $(LIB_PROTO)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $(TEST_OBJ) $(LIB_DAEMON) $(RUNTIME_LIBS) $(LIB_CLIENT) $(UV_LIBS) $(MSGPACK_LIBS) $(LDLIBS)

# The whole suite: C unit tests (each forked, with a timeout) and the
# integration tests (real daemon, real socket), all driven by pytest so the run
# ends with one summary line.
test: all
	CONVD_BUILD=$(BUILD) $(PYTHON) -m pytest -q tests

clean:
	rm -rf build build-san

.PHONY: all test clean

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
