#include <cub/device/device_radix_sort.cuh>
