# train_gpt: make (CPU build) · make GPU=1 (adds CUDA, cuBLASLt, NCCL) · make test · make check · make test-gpu · make fuzz
#            · make asan / asan-check (ASan+UBSan build and a short run under it)
#            · make quickstart. Folders are layers (README, "Layout"): util < data, parallel < kernels < model < train.
CC ?= gcc
CFLAGS ?= -O3
# -MMD -MP: every object also writes its header dependencies (.d), included below.
CFLAGS += -std=c11 -D_GNU_SOURCE -fopenmp -Wall -Wextra -I. -MMD -MP
LDLIBS = -lcjson -lnuma -lpcre2-8 -lxxhash -lm -lrt -lpthread
GPU ?= 0
.DEFAULT_GOAL := all

# The commit this build comes from, for --version ("unknown" outside git).
TG_COMMIT := $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)$(shell git diff --quiet HEAD 2>/dev/null || echo -modified)

UTIL_SRC = util/err.c util/fs.c util/json.c util/rng.c util/spell.c util/digest.c
DATA_SRC = data/shards.c data/tokenizer.c data/hellaswag.c
PARALLEL_SRC = parallel/comm.c parallel/comm_null.c parallel/group.c parallel/comm_shm.c parallel/comm_shm_sync.c \
               parallel/comm_shm_segment.c parallel/bootstrap.c parallel/bootstrap_io.c parallel/topology.c parallel/numa_bind.c parallel/mappings.c
# The CPU kernels are built twice: float32 (x.o) and bf16 storage (x.bf16.o,
# -DTG_CPU_BF16; kernels/cpu/act.h).
CPU_KERNEL_SRC = kernels/cpu/encoder.c kernels/cpu/layernorm.c kernels/cpu/matmul.c kernels/cpu/attention.c \
                 kernels/cpu/gelu.c kernels/cpu/xent.c kernels/cpu/vector.c kernels/cpu/optimizer.c \
                 kernels/cpu/ops_cpu.c
KERNELS_SRC = kernels/backend.c kernels/ops_null.c kernels/timed.c kernels/op_work.c kernels/op_rates.c kernels/cpu/gemm.c $(CPU_KERNEL_SRC)
MODEL_SRC = model/gpt.c model/gpt_layout.c model/gpt_mappings.c
TRAIN_SRC = train/config.c train/config_link.c train/optim.c train/dp_buckets.c train/zero_shards.c train/safetensors.c train/checkpoint.c train/ckpt_digest.c train/ckpt_data.c train/ckpt_prune.c train/llmc.c train/model_files.c train/plan.c train/plan_time.c train/op_table.c train/op_table_rates.c \
            train/runlog.c train/stop.c train/args.c train/setup.c train/step.c train/report.c train/sample.c train/loop.c \
            train/batch.c train/modes.c train/hellaswag.c
LIB_SRC = $(UTIL_SRC) $(DATA_SRC) $(PARALLEL_SRC) $(KERNELS_SRC) $(MODEL_SRC) $(TRAIN_SRC)

ifeq ($(GPU),1)
# The CUDA build lives in its own object directory; scripts/find_cuda.sh
# locates nvcc, the CUDA runtime, cuBLAS(Lt) and NCCL (CUDA_HOME, NCCL_HOME,
# usual paths, PyTorch's NVIDIA wheels) and names what is missing.
BUILD = build/gpu
include $(BUILD)/cuda.mk
CUDA_SRC = kernels/cuda/encoder.cu kernels/cuda/layernorm.cu kernels/cuda/gelu.cu kernels/cuda/residual.cu \
           kernels/cuda/residual_ln.cu \
           kernels/cuda/optimizer.cu kernels/cuda/matmul.cu kernels/cuda/lt_plan.cu kernels/cuda/lt_tune.cu kernels/cuda/flash_fwd.cu \
           kernels/cuda/flash_fwd_wgmma.cu kernels/cuda/flash_fwd_wgmma_ws.cu kernels/cuda/flash_bwd_wgmma.cu \
           kernels/cuda/flash_bwd_wgmma_persist.cu \
           kernels/cuda/flash_bwd.cu kernels/cuda/xent.cu kernels/cuda/step_stats.cu kernels/cuda/graph.cu \
           kernels/cuda/arch_probe.cu
LIB_SRC += kernels/cuda/ops_cuda.c kernels/cuda/tensor_map.c parallel/comm_nccl.c parallel/comm_nccl_wait.c parallel/comm_nccl_group.c \
           parallel/comm_nccl_create.c parallel/comm_nccl_time.c
CFLAGS += -DTG_CUDA $(CUDA_INCLUDES)
# Ampere (sm_80) and Hopper (sm_90a) machine code, plus PTX for newer GPUs:
# compute_80's, which the sm_80 pass writes anyway (a compute_90 PTX would be
# a third front-end pass, about a quarter of the build, for code that is the
# same: the kernels that need Hopper need sm_90a, which no PTX carries);
# or, with CUDA_SM=90a (80, 90, ...: make's command line or the environment),
# machine code for that one architecture only: the shorter build for the GPU
# at hand (a lent H100/H200). Changing it (or NVCCFLAGS) rebuilds the CUDA
# objects: $(BUILD)/nvcc_flags holds the flags they were built with.
ifdef CUDA_SM
CUDA_ARCH ?= -gencode arch=compute_$(CUDA_SM),code=sm_$(CUDA_SM)
else
CUDA_ARCH ?= -gencode arch=compute_80,code=[sm_80,compute_80] -gencode arch=compute_90a,code=sm_90a
endif
NVCCFLAGS ?= -O3
NVCCFLAGS += -std=c++17 -I. $(CUDA_ARCH) -Xcompiler -Wall,-Wextra -DTG_CUDA -MMD -MP
LIB_OBJ_EXTRA = $(CUDA_SRC:%.cu=$(BUILD)/%.o)
LDLIBS += $(CUDA_LIBS) -lstdc++

$(BUILD)/cuda.mk: scripts/find_cuda.sh
	@mkdir -p $(dir $@)
	bash scripts/find_cuda.sh > $@.tmp && mv $@.tmp $@

# Rewritten (its time moved on) only when the flags differ from the last
# build's: objects built for other architectures are not kept.
$(BUILD)/nvcc_flags: FORCE
	@mkdir -p $(dir $@)
	@printf '%s\n' '$(NVCCFLAGS)' | cmp -s - $@ 2>/dev/null || printf '%s\n' '$(NVCCFLAGS)' > $@

# ptxas's report of each kernel (registers, spills, shared memory) is kept
# beside its object as X.o.ptxas for scripts/kernel_resources.py; whatever
# else nvcc prints (warnings, errors) still reaches the terminal.
PTXAS_INFO = ^(ptxas info|    [0-9]+ bytes stack frame)
# (A pattern rule with two targets makes both in one run: an object without
# its report is rebuilt.)
$(BUILD)/%.o $(BUILD)/%.o.ptxas: %.cu $(BUILD)/cuda.mk $(BUILD)/nvcc_flags
	@mkdir -p $(dir $@)
	@echo "$(NVCC) $(NVCCFLAGS) --resource-usage -c $< -o $(BUILD)/$*.o"
	@o=$(BUILD)/$*.o; $(NVCC) $(NVCCFLAGS) --resource-usage -c $< -o $$o 2>$$o.nvcc; rc=$$?; \
	 grep -E '$(PTXAS_INFO)' $$o.nvcc >$$o.ptxas; grep -v -E '$(PTXAS_INFO)' $$o.nvcc >&2; rm -f $$o.nvcc; exit $$rc

# The CUDA objects and their reports (tests/t_kernel_resources.sh reads them).
cuda-objects: $(LIB_OBJ_EXTRA) $(LIB_OBJ_EXTRA:%=%.ptxas)

# tests/emu/test_tma.cu on the GPU: Hopper's bulk tensor copies, mbarriers and
# named barriers (kernels/cuda/tma.cuh, mbarrier.cuh) against the host's
# reference. Its own rule: no ptxas report, so that scripts/kernel_resources.py
# does not take its test kernels for the backend's.
$(BUILD)/tests/emu/test_tma.o: tests/emu/test_tma.cu $(BUILD)/cuda.mk $(BUILD)/nvcc_flags
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@
# Hopper's wgmma against a CPU product on the GPU (tests/gpu/hopper_check.cu):
# sm_90a machine code only, whatever CUDA_SM; its ptxas report beside it.
$(BUILD)/hopper_check: tests/gpu/hopper_check.cu tests/emu/wgmma_tiles.cuh kernels/cuda/wgmma.cuh \
                       kernels/cuda/smem_layout.h $(BUILD)/cuda.mk
	@mkdir -p $(dir $@)
	$(NVCC) -O3 -std=c++17 -I. -gencode arch=compute_90a,code=sm_90a -Xcompiler -Wall,-Wextra --resource-usage $< \
	    -o $@ 2>$@.ptxas || { cat $@.ptxas >&2; exit 1; }

# The tensor core's rate by wgmma product shape (tests/gpu/bench_wgmma.cu): as
# hopper_check, sm_90a machine code only, its ptxas report beside it.
$(BUILD)/bench_wgmma: tests/gpu/bench_wgmma.cu kernels/cuda/head_tiles.cuh kernels/cuda/wgmma.cuh kernels/cuda/mma.cuh \
                      kernels/cuda/smem_layout.h kernels/cuda/block_clock.cuh $(BUILD)/cuda.mk
	@mkdir -p $(dir $@)
	$(NVCC) -O3 -std=c++17 -I. -gencode arch=compute_90a,code=sm_90a -Xcompiler -Wall,-Wextra --resource-usage $< \
	    -o $@ 2>$@.ptxas || { cat $@.ptxas >&2; exit 1; }

.PHONY: cuda-objects
else
BUILD = build
LIB_SRC += parallel/comm_nccl_none.c
LIB_OBJ_EXTRA =
endif

LIB_OBJ = $(LIB_SRC:%.c=$(BUILD)/%.o) $(CPU_KERNEL_SRC:%.c=$(BUILD)/%.bf16.o) $(LIB_OBJ_EXTRA)

.PHONY: all clean test check test-sanitizers test-gpu quickstart setup data FORCE
all: train_gpt prepare

$(BUILD)/%.bf16.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DTG_CPU_BF16 -c $< -o $@

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# --version's commit: args.o is rebuilt when the commit changes.
$(BUILD)/train/args.o: CFLAGS += -DTG_COMMIT='"$(TG_COMMIT)"'
$(BUILD)/train/args.o: $(BUILD)/commit.stamp
$(BUILD)/commit.stamp: FORCE
	@mkdir -p $(dir $@)
	@echo '$(TG_COMMIT)' | cmp -s - $@ || echo '$(TG_COMMIT)' > $@

# Every program links its own object(s) with the library objects (one rule).
PROGRAMS = train_gpt test_kernels test_comm test_zero_shards test_cuda_kernels test_nccl bench_attention bench_copy test_tma
train_gpt_OBJ = $(BUILD)/train_gpt.o
# One test file per kernel family (tests/kernels/<family>.c): its CPU checks,
# and with CUDA its CUDA-against-CPU checks (tests/kernels/twin.c).
KERNEL_FAMILIES = encoder layernorm matmul dw_overlap attention attention_fused gelu residual residual_ln xent optimizer timed grad_writes
KERNEL_TEST_OBJ = $(KERNEL_FAMILIES:%=$(BUILD)/tests/kernels/%.o) $(BUILD)/tests/kernels/check.o \
                  $(if $(filter 1,$(GPU)),$(BUILD)/tests/kernels/twin.o)
test_kernels_OBJ = $(BUILD)/tests/kernels/main_cpu.o $(KERNEL_TEST_OBJ)
test_comm_OBJ = $(BUILD)/tests/test_comm.o
test_zero_shards_OBJ = $(BUILD)/tests/test_zero_shards.o
# Only with make GPU=1 (the emulation, tests/emu/build.sh, builds its own);
# so are bench_attention (tests/gpu/bench_attention.c: the attention timed alone)
# and bench_copy (tests/gpu/bench_copy.c: a device copy's GB/s, the memory ceiling).
test_cuda_kernels_OBJ = $(BUILD)/tests/kernels/main_cuda.o $(KERNEL_TEST_OBJ)
test_nccl_OBJ = $(BUILD)/tests/test_nccl.o
bench_attention_OBJ = $(BUILD)/tests/gpu/bench_attention.o $(BUILD)/tests/gpu/bench_attention_profile.o \
                      $(BUILD)/tests/gpu/block_profile.o
bench_copy_OBJ = $(BUILD)/tests/gpu/bench_copy.o
test_tma_OBJ = $(BUILD)/tests/emu/test_tma.o

.SECONDEXPANSION:
$(PROGRAMS:%=$(BUILD)/%): $(BUILD)/%: $$(%_OBJ) $(LIB_OBJ)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

# ./train_gpt is whichever flavour was built last (CPU, or GPU=1).
train_gpt: $(BUILD)/train_gpt FORCE
	@cmp -s $< $@ || { cp $< $@.tmp && mv -f $@.tmp $@; }

PREPARE_OBJ = $(addprefix $(BUILD)/data/,prepare.o prepare_inputs.o jsonl.o shard_writer.o tokenizer.o) $(BUILD)/util/err.o \
              $(BUILD)/util/fs.o
prepare: $(PREPARE_OBJ)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

setup:
	bash scripts/setup.sh

# KJV token shards for the default configs (assets/data/kjv_{train,val}_*.bin).
data: prepare
	bash scripts/prepare_kjv.sh

# Both targets work on a fresh machine: setup installs what is missing first
# (the quickstart skips the test-only packages). QUICKSTART_STEPS=N trains N steps
# instead of the config's 300 (tests/t_readme.sh runs the README's commands quickly).
quickstart:
	SETUP_SKIP_TEST_DEPS=1 bash scripts/setup.sh
	$(MAKE) all data
	scripts/launch.sh -n 2 --log-dir runs/tiny/launch -- \
	    ./train_gpt --config configs/tiny.json --set parallel.tp=2 $(if $(QUICKSTART_STEPS),--set train.steps=$(QUICKSTART_STEPS))

test:
	bash scripts/setup.sh
	$(MAKE) all build/test_kernels build/test_comm build/test_zero_shards
	bash tests/run.sh

# The quick tier, before every commit: the suites marked "# tier: check" (tests/run.sh).
check:
	bash scripts/setup.sh
	$(MAKE) all build/test_kernels build/test_comm build/test_zero_shards
	bash tests/run.sh --check

# The CUDA emulation under its race check and AddressSanitizer (two more builds
# of the kernels): the suites marked "# tier: sanitizers", which make test
# leaves out and CI runs.
test-sanitizers:
	bash scripts/setup.sh
	$(MAKE) all
	bash tests/run.sh --sanitizers

# The CUDA checks (tests/gpu/README.md); on a machine without a GPU it says
# so and runs nothing.
test-gpu:
	$(MAKE) GPU=1 all data build/gpu/test_cuda_kernels build/gpu/test_nccl build/gpu/test_tma build/gpu/hopper_check
	bash tests/gpu/run_gpu.sh

# ---- fuzzing (tests/fuzz/README.md) ----
# libFuzzer harnesses of the parsers under ASan and UBSan, built with clang
# into build/fuzz/ (the CPU sources; no OpenMP: one thread is what the
# fuzzer wants). UBSan does not recover, so any report is a crash.
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
FUZZ_HARNESSES = config shards safetensors state hf_config tokenizer hellaswag
FUZZ_CFLAGS = -g -O1 -std=c11 -D_GNU_SOURCE -I. -Wall -Wextra -Wno-unknown-pragmas -fno-omit-frame-pointer \
              -fsanitize=address,undefined -fno-sanitize-recover=all -MMD -MP
FUZZ_SRC = $(filter-out kernels/cuda/% parallel/comm_nccl%,$(LIB_SRC)) parallel/comm_nccl_none.c
FUZZ_LIB_OBJ = $(patsubst %.c,build/fuzz/%.o,$(sort $(FUZZ_SRC))) $(CPU_KERNEL_SRC:%.c=build/fuzz/%.bf16.o) \
               build/fuzz/tests/fuzz/fuzz_util.o
FUZZ_BINS = $(FUZZ_HARNESSES:%=build/fuzz/fuzz_%)
.PHONY: fuzz fuzz-build fuzz-replay
.SECONDARY: $(FUZZ_LIB_OBJ) $(FUZZ_HARNESSES:%=build/fuzz/tests/fuzz/fuzz_%.o)

build/fuzz/%.bf16.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -DTG_CPU_BF16 -fsanitize=fuzzer-no-link -c $< -o $@

build/fuzz/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

build/fuzz/fuzz_%: build/fuzz/tests/fuzz/fuzz_%.o $(FUZZ_LIB_OBJ)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $^ -o $@ $(LDLIBS)

fuzz-build: $(FUZZ_BINS)

# Each harness for FUZZ_SECONDS from a scratch copy of its seed corpus.
fuzz: fuzz-build
	bash tests/fuzz/run.sh fuzz $(FUZZ_SECONDS)

# Every committed seed once through its harness (fast, deterministic).
fuzz-replay: fuzz-build
	bash tests/fuzz/run.sh replay

# ---- AddressSanitizer and UndefinedBehaviorSanitizer (make asan, make asan-check) ----
# train_gpt and prepare from the CPU sources (the fuzzers' list) into
# build/asan/, with OpenMP as in the normal build (gcc's libgomp runs clean
# under ASan). UBSan does not recover: any report ends the program non-zero.
ASAN_CC ?= $(CC)
ASAN_CFLAGS = -g -O1 -std=c11 -D_GNU_SOURCE -fopenmp -I. -Wall -Wextra -fno-omit-frame-pointer \
              -fsanitize=address,undefined -fno-sanitize-recover=all -MMD -MP
ASAN_LIB_OBJ = $(patsubst %.c,build/asan/%.o,$(sort $(FUZZ_SRC))) $(CPU_KERNEL_SRC:%.c=build/asan/%.bf16.o)
ASAN_PREPARE_OBJ = $(patsubst $(BUILD)/%,build/asan/%,$(PREPARE_OBJ))
.PHONY: asan asan-check
.SECONDARY: $(ASAN_LIB_OBJ) $(ASAN_PREPARE_OBJ) build/asan/train_gpt.o

build/asan/%.bf16.o: %.c
	@mkdir -p $(dir $@)
	$(ASAN_CC) $(ASAN_CFLAGS) -DTG_CPU_BF16 -c $< -o $@

build/asan/%.o: %.c
	@mkdir -p $(dir $@)
	$(ASAN_CC) $(ASAN_CFLAGS) -c $< -o $@

build/asan/train/args.o: ASAN_CFLAGS += -DTG_COMMIT='"$(TG_COMMIT)"'
build/asan/train/args.o: $(BUILD)/commit.stamp

build/asan/train_gpt: build/asan/train_gpt.o $(ASAN_LIB_OBJ)
	$(ASAN_CC) $(ASAN_CFLAGS) $^ -o $@ $(LDLIBS)

build/asan/prepare: $(ASAN_PREPARE_OBJ)
	$(ASAN_CC) $(ASAN_CFLAGS) $^ -o $@ $(LDLIBS)

asan: build/asan/train_gpt build/asan/prepare

# A short train with a save, a resume, --eval, --sample and ./prepare under
# the sanitizers; any report fails it (tests/asan_check.sh).
asan-check: asan
	bash tests/asan_check.sh

clean:
	rm -rf build train_gpt prepare

# make -s print-VAR: a variable's value, for scripts that build from the same
# source lists (tests/emu/build.sh).
print-%:
	@echo $($*)

# The header dependencies every compile wrote (-MMD).
-include $(shell find build -name '*.d' 2>/dev/null)
