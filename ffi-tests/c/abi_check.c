/*
 * abi_check: compares what the official onnx 1.12.0 headers and the project's
 * include/onnxifi.h say about every ONNXIFI_* constant, every typedef size/alignment/signedness
 * and every struct size/offset, and that both headers' function declarations resolve to the
 * same symbols of the library. Prints each mismatch; exits 1 when there is any.
 */
#include <stdio.h>
#include <string.h>

#include "abi.h"

/* Finds an entry by name, or NULL. */
static const struct abi_entry *find(const struct abi_entry *e, size_t n, const char *name) {
    size_t i;
    for (i = 0; i < n; i++)
        if (strcmp(e[i].name, name) == 0) return &e[i];
    return NULL;
}

/* Compares the `n` official entries with ours; returns the number of mismatches. */
static int compare(const char *what, const struct abi_entry *off, size_t n,
                   const struct abi_entry *ours, size_t m) {
    size_t i;
    int bad = 0;
    for (i = 0; i < n; i++) {
        const struct abi_entry *o = find(ours, m, off[i].name);
        if (!off[i].present) continue;
        if (o == NULL || !o->present) {
            printf("MISMATCH %s %s: official %lld, missing in include/onnxifi.h\n", what,
                   off[i].name, off[i].value);
            bad++;
        } else if (o->value != off[i].value) {
            printf("MISMATCH %s %s: official %lld (0x%llx), ours %lld (0x%llx)\n", what,
                   off[i].name, off[i].value, (unsigned long long)off[i].value, o->value,
                   (unsigned long long)o->value);
            bad++;
        }
    }
    return bad;
}

int main(void) {
    struct abi_tables off, ours;
    size_t i;
    int bad = 0;
    abi_official(&off);
    abi_ours(&ours);
    bad += compare("constant", off.constants, off.constant_count, ours.constants,
                   ours.constant_count);
    bad += compare("layout", off.layouts, off.layout_count, ours.layouts, ours.layout_count);
    for (i = 0; i < off.function_count && i < ours.function_count; i++) {
        if (off.functions[i].address == NULL || off.functions[i].address != ours.functions[i].address) {
            printf("MISMATCH function %s: official-declared %p, ours %p\n", off.functions[i].name,
                   (void *)(size_t)off.functions[i].address,
                   (void *)(size_t)ours.functions[i].address);
            bad++;
        }
    }
    if (off.function_count != ours.function_count) {
        printf("MISMATCH function count %zu vs %zu\n", off.function_count, ours.function_count);
        bad++;
    }
    if (bad) {
        printf("abi_check: %d mismatch(es)\n", bad);
        return 1;
    }
    printf("abi_check: OK (%zu constants, %zu layout facts, %zu functions)\n", off.constant_count,
           off.layout_count, off.function_count);
    return 0;
}
