# train_gpt: make (CPU build) · make test · make quickstart
CC ?= gcc
CFLAGS ?= -O3
CFLAGS += -std=c11 -D_GNU_SOURCE -fopenmp -Wall -Wextra -I.
LDLIBS = -lcjson -lnuma -lpcre2-8 -lm -lrt -lpthread

BUILD = build
MODEL_SRC = model/config.c model/rng.c model/gpt.c model/gpt_layout.c model/optim.c model/safetensors.c \
            model/checkpoint.c model/plan.c model/cpu/gemm.c model/cpu/encoder.c model/cpu/layernorm.c model/cpu/matmul.c \
            model/cpu/attention.c model/cpu/gelu.c model/cpu/xent.c model/cpu/vector.c model/cpu/ops_cpu.c
LIB_SRC = $(MODEL_SRC) parallel/comm_null.c parallel/comm_shm.c parallel/bootstrap.c parallel/topology.c \
          parallel/numa_bind.c parallel/mappings.c data/shards.c data/tokenizer.c util/err.c
LIB_OBJ = $(LIB_SRC:%.c=$(BUILD)/%.o)
HEADERS = $(wildcard model/*.h model/cpu/*.h parallel/*.h data/*.h util/*.h)

.PHONY: all clean test quickstart setup data
all: train_gpt prepare

$(BUILD)/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

train_gpt: $(BUILD)/train_gpt.o $(LIB_OBJ)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

prepare: $(BUILD)/data/prepare.o $(BUILD)/data/tokenizer.o $(BUILD)/util/err.o
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/test_kernels: $(BUILD)/tests/test_kernels.o $(LIB_OBJ)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/test_comm: $(BUILD)/tests/test_comm.o $(LIB_OBJ)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

setup:
	bash scripts/setup.sh

# KJV token shards for the default configs (assets/data/kjv_{train,val}_*.bin).
data: prepare
	bash scripts/prepare_kjv.sh

# Both targets work on a fresh machine: setup installs what is missing first
# (the quickstart skips the test-only packages).
quickstart:
	SETUP_SKIP_TEST_DEPS=1 bash scripts/setup.sh
	$(MAKE) all data
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} scripts/launch.sh -n 2 --log-dir runs/tiny/launch -- \
	    ./train_gpt --config configs/tiny.json --set parallel.tp=2

test:
	bash scripts/setup.sh
	$(MAKE) all $(BUILD)/test_kernels $(BUILD)/test_comm
	bash tests/run.sh

clean:
	rm -rf $(BUILD) train_gpt prepare
