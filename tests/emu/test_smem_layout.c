/* Unit test of kernels/cuda/smem_layout.h (wgmma's descriptor, swizzle and
 * canonical layouts), on the CPU, against values written here from the PTX
 * ISA, not from the code under test:
 * - the descriptor's bit positions ("Matrix Descriptor Format"): a
 *   descriptor of known fields as a literal, each field alone at its bits,
 *   the 18-bit address window, the reserved bits;
 * - the swizzle modes (the 16-byte chunk XOR the address bits above the
 *   128-byte row, "Shared Memory Matrix Layout" figures): addresses by hand;
 * - the canonical layouts (K-major and MN-major, each swizzle): offsets of a
 *   handful of elements by hand, and whole tiles against the rows the bulk
 *   tensor copy writes (a swizzle-span row per K or MN row, chunks XORed),
 *   also with the start moved along K as kernels step it.
 * Prints "ok NAME" / "not ok NAME - reason"; exit 1 on a failure. */
#include <stdio.h>

#include "kernels/cuda/smem_layout.h"
#include "tests/tap.h"

static int check_descriptor(void) {
    int failed = 0;
    /* start 0x12340, LBO 256, SBO 1024, base offset 5, 128B: fields 0x1234,
     * 0x10 at bit 16, 0x40 at bit 32, 5 at bit 49, 1 at bit 62 */
    const smem_desc_fields f = {0x12340, 256, 1024, 5, SMEM_SWIZZLE_128B};
    const uint64_t want = 0x400A004000101234ull;
    failed |= tap_result(smem_desc_encode(f) == want, "smem_desc_encode_bit_positions", "not 0x400A004000101234");
    const smem_desc_fields g = smem_desc_decode(want);
    failed |= tap_result(g.start == 0x12340 && g.lbo == 256 && g.sbo == 1024 && g.base_offset == 5 && g.swizzle == 1,
                         "smem_desc_decode_bit_positions", "fields differ from the literal's");
    /* each field alone, at its largest value */
    const smem_desc_fields s = {0x3fff0, 0, 0, 0, 0}, l = {0, 0x3fff0, 0, 0, 0}, t = {0, 0, 0x3fff0, 0, 0},
                           b = {0, 0, 0, 7, 0}, w = {0, 0, 0, 0, SMEM_SWIZZLE_32B};
    const int alone = smem_desc_encode(s) == 0x3fffull && smem_desc_encode(l) == 0x3fff0000ull &&
                      smem_desc_encode(t) == 0x3fff00000000ull && smem_desc_encode(b) == 0x000e000000000000ull &&
                      smem_desc_encode(w) == 0xc000000000000000ull;
    failed |= tap_result(alone, "smem_desc_fields_alone_at_their_bits", "a field leaked out of its bits");
    /* matrix-descriptor-encode(x) = (x & 0x3FFFF) >> 4: the window wraps */
    const smem_desc_fields wrap = {0x40010, 0, 0, 0, 0};
    failed |= tap_result(smem_desc_encode(wrap) == 1, "smem_desc_address_window_18_bits", "0x40010 did not encode as 1");
    failed |= tap_result(SMEM_DESC_RESERVED == 0x3ff1c000c000c000ull && (SMEM_DESC_RESERVED & smem_desc_encode(f)) == 0 &&
                             (smem_desc_make(0x3fff0, 0x3fff0, 0x3fff0, 3) & SMEM_DESC_RESERVED) == 0,
                         "smem_desc_reserved_bits", "reserved mask wrong or hit by a field");
    failed |= tap_result(smem_desc_make(0x400, 16, 1024, SMEM_SWIZZLE_64B) == 0x8000004000010040ull, "smem_desc_make",
                         "not 0x8000004000010040");
    return failed;
}

static int check_swizzle(void) {
    /* {mode, address, swizzled} from the ISA's pictures: 128B rows XOR row % 8;
     * 64B: 64-byte rows, pairs of rows share a phase (bits 7-8); 32B: bit 7 */
    static const unsigned cases[][3] = {
        {SMEM_SWIZZLE_128B, 0x080, 0x090}, {SMEM_SWIZZLE_128B, 0x1d0, 0x1e0}, {SMEM_SWIZZLE_128B, 0x3f0, 0x380},
        {SMEM_SWIZZLE_128B, 0x420, 0x420}, {SMEM_SWIZZLE_128B, 0x0a7, 0x0b7}, {SMEM_SWIZZLE_64B, 0x040, 0x040},
        {SMEM_SWIZZLE_64B, 0x080, 0x090},  {SMEM_SWIZZLE_64B, 0x1b0, 0x180},  {SMEM_SWIZZLE_64B, 0x270, 0x270},
        {SMEM_SWIZZLE_32B, 0x080, 0x090},  {SMEM_SWIZZLE_32B, 0x090, 0x080},  {SMEM_SWIZZLE_32B, 0x100, 0x100},
        {SMEM_SWIZZLE_32B, 0x1a0, 0x1b0},  {SMEM_SWIZZLE_NONE, 0x1d0, 0x1d0},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) bad += smem_swizzle_apply(cases[i][1], cases[i][0], 0) != cases[i][2];
    int failed = tap_result(bad == 0, "smem_swizzle_modes_by_hand", "an address swizzled differently from the ISA's pictures");
    /* base offset b: the pattern's rows counted from b rows above the boundary */
    failed |= tap_result(smem_swizzle_apply(0x080, SMEM_SWIZZLE_128B, 1) == 0x080 &&
                             smem_swizzle_apply(0x000, SMEM_SWIZZLE_128B, 1) == 0x070,
                         "smem_swizzle_base_offset", "base offset 1 did not shift the row phase by one");
    failed |= tap_result(smem_swizzle_span(SMEM_SWIZZLE_128B) == 128 && smem_swizzle_span(SMEM_SWIZZLE_64B) == 64 &&
                             smem_swizzle_span(SMEM_SWIZZLE_32B) == 32 && smem_swizzle_span(SMEM_SWIZZLE_NONE) == 16,
                         "smem_swizzle_spans", "spans are 128, 64, 32, 16");
    return failed;
}

/* {major, swizzle, lbo, sbo, mn, k, shared address of the element, tile at 0} */
static const unsigned elements[][7] = {
    {SMEM_K_MAJOR, SMEM_SWIZZLE_NONE, 128, 256, 0, 0, 0},     {SMEM_K_MAJOR, SMEM_SWIZZLE_NONE, 128, 256, 1, 0, 16},
    {SMEM_K_MAJOR, SMEM_SWIZZLE_NONE, 128, 256, 0, 1, 2},     {SMEM_K_MAJOR, SMEM_SWIZZLE_NONE, 128, 256, 0, 8, 128},
    {SMEM_K_MAJOR, SMEM_SWIZZLE_NONE, 128, 256, 8, 0, 256},   {SMEM_K_MAJOR, SMEM_SWIZZLE_NONE, 128, 256, 13, 11, 470},
    {SMEM_K_MAJOR, SMEM_SWIZZLE_NONE, 128, 256, 63, 15, 2046}, {SMEM_K_MAJOR, SMEM_SWIZZLE_32B, 16, 256, 0, 8, 16},
    {SMEM_K_MAJOR, SMEM_SWIZZLE_32B, 16, 256, 4, 0, 144},     {SMEM_K_MAJOR, SMEM_SWIZZLE_32B, 16, 256, 4, 8, 128},
    {SMEM_K_MAJOR, SMEM_SWIZZLE_32B, 16, 256, 13, 11, 422},   {SMEM_K_MAJOR, SMEM_SWIZZLE_32B, 16, 256, 9, 3, 294},
    {SMEM_K_MAJOR, SMEM_SWIZZLE_64B, 16, 512, 2, 0, 144},     {SMEM_K_MAJOR, SMEM_SWIZZLE_64B, 16, 512, 7, 9, 482},
    {SMEM_K_MAJOR, SMEM_SWIZZLE_64B, 16, 512, 8, 15, 542},    {SMEM_K_MAJOR, SMEM_SWIZZLE_128B, 16, 1024, 1, 0, 144},
    {SMEM_K_MAJOR, SMEM_SWIZZLE_128B, 16, 1024, 3, 10, 420},  {SMEM_K_MAJOR, SMEM_SWIZZLE_128B, 16, 1024, 15, 15, 2030},
    {SMEM_MN_MAJOR, SMEM_SWIZZLE_NONE, 1024, 128, 9, 0, 130}, {SMEM_MN_MAJOR, SMEM_SWIZZLE_NONE, 1024, 128, 0, 9, 1040},
    {SMEM_MN_MAJOR, SMEM_SWIZZLE_NONE, 1024, 128, 63, 15, 2046}, {SMEM_MN_MAJOR, SMEM_SWIZZLE_128B, 2048, 1024, 0, 1, 144},
    {SMEM_MN_MAJOR, SMEM_SWIZZLE_128B, 2048, 1024, 10, 3, 420}, {SMEM_MN_MAJOR, SMEM_SWIZZLE_128B, 2048, 1024, 70, 9, 3228},
    {SMEM_MN_MAJOR, SMEM_SWIZZLE_64B, 1024, 512, 0, 2, 144},  {SMEM_MN_MAJOR, SMEM_SWIZZLE_64B, 1024, 512, 5, 7, 506},
    {SMEM_MN_MAJOR, SMEM_SWIZZLE_64B, 1024, 512, 40, 8, 1552}, {SMEM_MN_MAJOR, SMEM_SWIZZLE_32B, 512, 256, 0, 4, 144},
    {SMEM_MN_MAJOR, SMEM_SWIZZLE_32B, 512, 256, 3, 5, 182},   {SMEM_MN_MAJOR, SMEM_SWIZZLE_32B, 512, 256, 17, 12, 914},
};

/* Where the bulk tensor copy puts byte `byte` of a w-byte row starting at
 * row_at (a tile on a 1024-byte boundary): its 16-byte chunk XOR the row's
 * address bits 7 and up. */
static unsigned tma_row(unsigned row_at, unsigned byte, unsigned w) {
    return row_at + ((byte / 16) ^ ((row_at >> 7) & (w / 16 - 1))) * 16 + byte % 16;
}

static int check_layouts(void) {
    int bad = 0;
    for (size_t i = 0; i < sizeof elements / sizeof elements[0]; i++) {
        const unsigned *e = elements[i];
        const smem_desc_fields f = {0, e[2], e[3], 0, e[1]};
        bad += smem_element_address(f, e[0], e[4], e[5], 2) != e[6];
    }
    int failed = tap_result(bad == 0, "smem_canonical_layouts_by_hand", "an element's address differs from the ISA's layout");
    /* whole tiles: K-major [64 rows][w / 2] and MN-major [16 k][64 n] (two
     * atoms side by side at LBO for w < 128) as the copy writes them, read
     * with SBO = 8 rows, at every k16 step of the K-major row */
    bad = 0;
    const unsigned modes[3] = {SMEM_SWIZZLE_32B, SMEM_SWIZZLE_64B, SMEM_SWIZZLE_128B};
    for (int m = 0; m < 3; m++) {
        const unsigned w = smem_swizzle_span(modes[m]), tile = 0x2000;
        for (unsigned step = 0; step < w / 32; step++) {
            const smem_desc_fields f = {tile + 32 * step, 16, 8 * w, 0, modes[m]};
            for (unsigned r = 0; r < 64; r++)
                for (unsigned k = 0; k < 16; k++)
                    bad += smem_element_address(f, SMEM_K_MAJOR, r, k, 2) != tma_row(tile + r * w, (16 * step + k) * 2, w);
        }
        const unsigned per = w / 2, lbo = 16 * w; /* n per row; one atom: 16 k rows */
        const smem_desc_fields g = {tile, lbo, 8 * w, 0, modes[m]};
        for (unsigned k = 0; k < 16; k++)
            for (unsigned n = 0; n < 64; n++)
                bad += smem_element_address(g, SMEM_MN_MAJOR, n, k, 2) != tma_row(tile + (n / per) * lbo + k * w, (n % per) * 2, w);
    }
    failed |= tap_result(bad == 0, "smem_swizzled_tiles_match_tensor_copy_rows", "an element's address differs from the copy's");
    return failed;
}

int main(void) {
    int failed = check_descriptor();
    failed |= check_swizzle();
    failed |= check_layouts();
    return failed;
}
