/* Emulated cub::DeviceRadixSort::SortPairs (tests/emu): a stable sort by key
 * bits [begin_bit, end_bit) (other bits ignored, as cub does), with cub's
 * two-phase temporary-storage protocol; in stream order (recorded during a
 * stream capture, like any stream work). */
#ifndef EMU_CUB_DEVICE_RADIX_SORT_CUH
#define EMU_CUB_DEVICE_RADIX_SORT_CUH
#include <cuda_runtime_api.h>
#include <algorithm>
#include <vector>

extern "C" int emu_check_device_range(const void *p, size_t bytes, const char *what);
void emu_flush_pending_copies();

namespace cub {
struct DeviceRadixSort {
    template <typename KeyT, typename ValueT, typename NumItemsT>
    static cudaError_t SortPairs(void *d_temp_storage, size_t &temp_storage_bytes, const KeyT *d_keys_in, KeyT *d_keys_out,
                                 const ValueT *d_values_in, ValueT *d_values_out, NumItemsT num_items, int begin_bit = 0,
                                 int end_bit = sizeof(KeyT) * 8, cudaStream_t stream = 0) {
        /* what cub asks for is roughly the double buffers plus histograms */
        const size_t need = 2 * (size_t)num_items * (sizeof(KeyT) + sizeof(ValueT)) + 4096;
        if (d_temp_storage == NULL) {
            temp_storage_bytes = need;
            return cudaSuccess;
        }
        if (temp_storage_bytes < need) return cudaErrorInvalidValue;
        if (begin_bit < 0 || end_bit > (int)(sizeof(KeyT) * 8) || begin_bit > end_bit) return cudaErrorInvalidValue;
        if (!emu_check_device_range(d_temp_storage, need, "cub SortPairs temp") ||
            !emu_check_device_range(d_keys_in, (size_t)num_items * sizeof(KeyT), "cub SortPairs keys_in") ||
            !emu_check_device_range(d_keys_out, (size_t)num_items * sizeof(KeyT), "cub SortPairs keys_out") ||
            !emu_check_device_range(d_values_in, (size_t)num_items * sizeof(ValueT), "cub SortPairs values_in") ||
            !emu_check_device_range(d_values_out, (size_t)num_items * sizeof(ValueT), "cub SortPairs values_out"))
            return cudaErrorIllegalAddress;
        if (::emu::capturing(stream)) { /* cub's kernels would be captured: the sort runs with each launch */
            ::emu::capture_node([=] { sort(d_keys_in, d_keys_out, d_values_in, d_values_out, num_items, begin_bit, end_bit); });
            return cudaSuccess;
        }
        if (::emu::lazy_take(stream, [=] { sort(d_keys_in, d_keys_out, d_values_in, d_values_out, num_items, begin_bit, end_bit); }))
            return cudaSuccess; /* EMU_LAZY=1: in its stream's queue */
        emu_flush_pending_copies(); /* the stream's earlier copies come first */
        sort(d_keys_in, d_keys_out, d_values_in, d_values_out, num_items, begin_bit, end_bit);
        return cudaSuccess;
    }

  private:
    template <typename KeyT, typename ValueT, typename NumItemsT>
    static void sort(const KeyT *d_keys_in, KeyT *d_keys_out, const ValueT *d_values_in, ValueT *d_values_out,
                     NumItemsT num_items, int begin_bit, int end_bit) {
        const int bits = end_bit - begin_bit;
        const unsigned long long mask = bits >= 64 ? ~0ull : ((1ull << bits) - 1);
        std::vector<size_t> idx((size_t)num_items);
        for (size_t i = 0; i < idx.size(); i++) idx[i] = i;
        auto key_of = [&](size_t i) { return ((unsigned long long)d_keys_in[i] >> begin_bit) & mask; };
        std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return key_of(a) < key_of(b); });
        std::vector<KeyT> k((size_t)num_items);
        std::vector<ValueT> v((size_t)num_items);
        for (size_t i = 0; i < idx.size(); i++) {
            k[i] = d_keys_in[idx[i]];
            v[i] = d_values_in[idx[i]];
        }
        std::copy(k.begin(), k.end(), d_keys_out);
        std::copy(v.begin(), v.end(), d_values_out);
    }
};
} // namespace cub
#endif
