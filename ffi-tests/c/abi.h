/* Tables filled by the two translation units of abi_check (one per header). */
#ifndef ONNXIFI_FFI_TESTS_ABI_H
#define ONNXIFI_FFI_TESTS_ABI_H

#include <stddef.h>

/* One named integer: a constant's value, a size, an offset or an alignment. */
struct abi_entry {
    const char *name;
    long long value;
    int present; /* 0 when the header does not define the constant */
};

/* One exported function, as the TU's header declares it. */
struct abi_function {
    const char *name;
    void (*address)(void);
};

/* What one header says: its constants, its layouts, and the functions it declares. */
struct abi_tables {
    const struct abi_entry *constants;
    size_t constant_count;
    const struct abi_entry *layouts;
    size_t layout_count;
    const struct abi_function *functions;
    size_t function_count;
};

/* Tables of the official onnx 1.12.0 onnxifi.h + onnxifi_ext.h. */
void abi_official(struct abi_tables *t);
/* Tables of the project's include/onnxifi.h. */
void abi_ours(struct abi_tables *t);

#endif
