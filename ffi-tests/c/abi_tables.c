/*
 * One translation unit of abi_check, compiled twice: with -DABI_OFFICIAL against the official
 * onnx 1.12.0 headers (function ABI_FN = abi_official), and without it against the project's
 * include/onnxifi.h (ABI_FN = abi_ours). `abi_constants.inc` is generated at test time by
 * run-c-tests.sh from the #defines of the official header: one #ifdef'd entry per constant.
 */
#ifdef ABI_OFFICIAL
#include "onnx/onnxifi.h"
#include "onnx/onnxifi_ext.h"
#define ABI_FN abi_official
#else
#include "onnxifi.h"
#define ABI_FN abi_ours
#endif

#include <stdint.h>
#include <string.h>

#include "abi.h"

static const struct abi_entry constants[] = {
#include "abi_constants.inc"
};

#define ALIGN_OF(T) offsetof(struct { char c; T t; }, t)
#define SIZE(T) {"sizeof(" #T ")", (long long)sizeof(T), 1}, {"alignof(" #T ")", (long long)ALIGN_OF(T), 1}
#define FIELD(S, F)                                                  \
    {"offsetof(" #S "." #F ")", (long long)offsetof(S, F), 1},       \
    {"sizeof(" #S "." #F ")", (long long)sizeof(((S *)0)->F), 1}
/* -1 for a signed type, 1 for an unsigned one (gcc shifts signed values arithmetically) */
#define SIGNED(T) {"sign(" #T ")", (long long)((T)-1 >> (sizeof(T) * 8 - 1)), 1}

static const struct abi_entry layouts[] = {
    SIZE(onnxBackendID), SIZE(onnxBackend), SIZE(onnxGraph), SIZE(onnxEvent),
    SIZE(onnxStatus), SIGNED(onnxStatus), SIZE(onnxEnum), SIGNED(onnxEnum),
    SIZE(onnxBitfield), SIGNED(onnxBitfield), SIZE(onnxPointer), SIGNED(onnxPointer),
    SIZE(onnxEventState), SIGNED(onnxEventState), SIZE(onnxBackendInfo),
    SIGNED(onnxBackendInfo), SIZE(onnxExtensionFunctionPointer),
    SIZE(onnxTensorDescriptorV1),
    FIELD(onnxTensorDescriptorV1, tag), FIELD(onnxTensorDescriptorV1, name),
    FIELD(onnxTensorDescriptorV1, dataType), FIELD(onnxTensorDescriptorV1, memoryType),
    FIELD(onnxTensorDescriptorV1, dimensions), FIELD(onnxTensorDescriptorV1, shape),
    FIELD(onnxTensorDescriptorV1, buffer),
    SIZE(onnxMemoryFenceV1),
    FIELD(onnxMemoryFenceV1, tag), FIELD(onnxMemoryFenceV1, type),
    FIELD(onnxMemoryFenceV1, event),
};

/*
 * Every exported function, assigned to a pointer of the official type. In the official TU the
 * types are the header's onnx...Function typedefs; in ours they are spelled out from the
 * official prototypes, so a differing prototype in include/onnxifi.h fails to compile
 * (-Werror=incompatible-pointer-types). Both TUs take the address, so every symbol must link.
 */
#ifdef ABI_OFFICIAL
#define FN(name, ...) name##Function p_##name = &name;
#else
#define FN(name, ...) onnxStatus (*p_##name)(__VA_ARGS__) = &name;
#endif
#define FUNCTIONS(X)                                                                        \
    X(onnxGetBackendIDs, onnxBackendID *, size_t *)                                         \
    X(onnxReleaseBackendID, onnxBackendID)                                                  \
    X(onnxGetBackendInfo, onnxBackendID, onnxBackendInfo, void *, size_t *)                 \
    X(onnxGetBackendCompatibility, onnxBackendID, size_t, const void *)                     \
    X(onnxInitBackend, onnxBackendID, const uint64_t *, onnxBackend *)                      \
    X(onnxReleaseBackend, onnxBackend)                                                      \
    X(onnxInitEvent, onnxBackend, onnxEvent *)                                              \
    X(onnxSignalEvent, onnxEvent)                                                           \
    X(onnxGetEventState, onnxEvent, onnxEventState *)                                       \
    X(onnxWaitEvent, onnxEvent)                                                             \
    X(onnxReleaseEvent, onnxEvent)                                                          \
    X(onnxInitGraph, onnxBackend, const uint64_t *, size_t, const void *, uint32_t,         \
      const onnxTensorDescriptorV1 *, onnxGraph *)                                          \
    X(onnxSetGraphIO, onnxGraph, uint32_t, const onnxTensorDescriptorV1 *, uint32_t,        \
      const onnxTensorDescriptorV1 *)                                                       \
    X(onnxRunGraph, onnxGraph, const onnxMemoryFenceV1 *, onnxMemoryFenceV1 *)              \
    X(onnxReleaseGraph, onnxGraph)                                                          \
    X(onnxGetExtensionFunctionAddress, onnxBackendID, const char *,                         \
      onnxExtensionFunctionPointer *)

void ABI_FN(struct abi_tables *t) {
    FUNCTIONS(FN)
#define ENTRY(name, ...) {#name, (void (*)(void))0},
    static struct abi_function functions[] = {FUNCTIONS(ENTRY)};
    size_t i = 0;
#define STORE(name, ...) memcpy(&functions[i++].address, &p_##name, sizeof(p_##name));
    FUNCTIONS(STORE)
    t->constants = constants;
    t->constant_count = sizeof(constants) / sizeof(constants[0]);
    t->layouts = layouts;
    t->layout_count = sizeof(layouts) / sizeof(layouts[0]);
    t->functions = functions;
    t->function_count = i;
}
