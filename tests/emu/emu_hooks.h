/* What the emulation (tests/emu/emu_runtime.cpp) reports to tests beyond
 * the CUDA API: counters no real library offers. Only the emulated build of
 * the tests (tests/emu/build.sh defines TG_CUDA_EMU) may call these. */
#ifndef EMU_HOOKS_H
#define EMU_HOOKS_H
#ifdef __cplusplus
extern "C" {
#endif
/* cublasLtMatmulAlgoGetHeuristic calls so far in this process. */
long emu_lt_heuristic_calls(void);
/* cublasLtMatmul calls so far that ran with this epilogue (a cublasLtEpilogue_t value). */
long emu_lt_matmul_calls(unsigned epilogue);
/* How many distinct streams (the legacy stream 0 not counted) cublasLtMatmul
 * has been given so far: 2 once a product ran beside the compute stream. */
long emu_lt_matmul_streams(void);
/* 1 when cuBLASLt refuses every epilogue (EMU_LT_NO_EPILOGUE=1: the
 * heuristic; =matmul: cublasLtMatmul), so the fused paths' fallbacks run;
 * 0 otherwise. */
int emu_lt_epilogues_refused(void);
/* Launches of this kernel so far (its name as launched, without template
 * arguments: "layernorm_backward_fused_kernel"), counted when launched (a
 * lazy device runs them later), so that a test can tell which of a
 * launcher's paths it took. */
long emu_kernel_launches(const char *kernel);
/* Errors the emulator has reported so far ("emu: ERROR" lines). A test that
 * provokes one on purpose takes it back with emu_errors_forgive(count before),
 * so that the exit status stays its own. */
long emu_errors(void);
void emu_errors_forgive(long to);
/* Data races found so far, each reported one or not (reports are made once
 * per pair of source lines). Only in the race check's build (EMU_RACE=1,
 * tests/emu/emu_race.cpp). */
long emu_races(void);
/* Why the emulated cuTensorMapEncodeTiled last refused a map (the driver's
 * rule broken), or "" after a map it accepted (tests/emu/emu_tma.cpp). */
const char *emu_tensor_map_refusal(void);
#ifdef __cplusplus
}
#endif
#endif
