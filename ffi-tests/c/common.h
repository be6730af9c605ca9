/*
 * Helpers shared by the C tests: file reading, the deterministic input, output comparison,
 * status names, and one complete run of examples/small_cnn.onnx through a table of ONNXIFI
 * entry points (filled from direct symbols by lifecycle.c, from onnxifi_load by loader_test.c).
 *
 * Include an onnxifi.h (ours or the official one) before this file.
 */
#ifndef ONNXIFI_FFI_TESTS_COMMON_H
#define ONNXIFI_FFI_TESTS_COMMON_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Numeric values written out here on purpose: they must not come from the header under test. */
static const struct {
    int32_t code;
    const char *name;
} test_status_names[] = {
    {0x0000, "SUCCESS"}, {0x0001, "FALLBACK"}, {0x0101, "INVALID_ID"},
    {0x0102, "INVALID_SIZE"}, {0x0103, "INVALID_POINTER"}, {0x0104, "INVALID_PROTOBUF"},
    {0x0105, "INVALID_MODEL"}, {0x0106, "INVALID_BACKEND"}, {0x0107, "INVALID_GRAPH"},
    {0x0108, "INVALID_EVENT"}, {0x0109, "INVALID_STATE"}, {0x010A, "INVALID_NAME"},
    {0x010B, "INVALID_SHAPE"}, {0x010C, "INVALID_DATATYPE"}, {0x010D, "INVALID_MEMORY_TYPE"},
    {0x010E, "INVALID_MEMORY_LOCATION"}, {0x010F, "INVALID_FENCE_TYPE"},
    {0x0110, "INVALID_PROPERTY"}, {0x0201, "UNSUPPORTED_TAG"}, {0x0202, "UNSUPPORTED_VERSION"},
    {0x0203, "UNSUPPORTED_OPERATOR"}, {0x0204, "UNSUPPORTED_ATTRIBUTE"},
    {0x0205, "UNSUPPORTED_SHAPE"}, {0x0206, "UNSUPPORTED_DATATYPE"},
    {0x0207, "UNSUPPORTED_MEMORY_TYPE"}, {0x0208, "UNSUPPORTED_FENCE_TYPE"},
    {0x0209, "UNSUPPORTED_PROPERTY"}, {0x0301, "UNIDENTIFIED_NAME"},
    {0x0302, "MISMATCHING_SHAPE"}, {0x0303, "MISMATCHING_DATATYPE"},
    {0x0401, "NO_SYSTEM_MEMORY"}, {0x0402, "NO_DEVICE_MEMORY"}, {0x0403, "NO_SYSTEM_RESOURCES"},
    {0x0404, "NO_DEVICE_RESOURCES"}, {0x0405, "BACKEND_UNAVAILABLE"},
    {0x0406, "INTERNAL_ERROR"},
};

/* The header's name of a status, or "?" for a value no header defines. */
static const char *test_status_name(int32_t code) {
    size_t i;
    for (i = 0; i < sizeof(test_status_names) / sizeof(test_status_names[0]); i++) {
        if (test_status_names[i].code == code) return test_status_names[i].name;
    }
    return "?";
}

static int test_failures = 0;

/* Records a failure when `got` differs from `want`, naming the call. */
#define EXPECT_STATUS(call, want)                                                             \
    do {                                                                                      \
        int32_t got_ = (int32_t)(call);                                                       \
        if (got_ != (int32_t)(want)) {                                                        \
            fprintf(stderr, "%s:%d: %s returned 0x%04x %s, expected 0x%04x %s\n", __FILE__,   \
                    __LINE__, #call, (unsigned)got_, test_status_name(got_), (unsigned)(want), \
                    test_status_name((int32_t)(want)));                                       \
            test_failures++;                                                                  \
        }                                                                                     \
    } while (0)

/* Records a failure when `cond` is false. */
#define EXPECT(cond, ...)                                                 \
    do {                                                                  \
        if (!(cond)) {                                                    \
            fprintf(stderr, "%s:%d: %s: ", __FILE__, __LINE__, #cond);    \
            fprintf(stderr, __VA_ARGS__);                                 \
            fputc('\n', stderr);                                          \
            test_failures++;                                              \
        }                                                                 \
    } while (0)

/* Reads a whole file into a malloc'd buffer; exits on error. */
static void *test_read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    long len;
    void *buf;
    if (f == NULL) {
        fprintf(stderr, "cannot open %s\n", path);
        exit(2);
    }
    if (fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fprintf(stderr, "cannot size %s\n", path);
        exit(2);
    }
    buf = malloc(len > 0 ? (size_t)len : 1);
    if (buf == NULL || fread(buf, 1, (size_t)len, f) != (size_t)len) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(2);
    }
    fclose(f);
    *size = (size_t)len;
    return buf;
}

/* The deterministic input of examples/make_small_cnn.py: x[i] = ((i*37+11) % 101)/50 - 1. */
static void test_fill_input(float *x, size_t n) {
    size_t i;
    for (i = 0; i < n; i++) x[i] = (float)((i * 37 + 11) % 101) / 50.0f - 1.0f;
}

/* Compares `n` floats; prints the first differences and returns the number of mismatches. */
static int test_compare(const float *got, const float *want, size_t n, float atol, float rtol) {
    size_t i;
    int bad = 0;
    for (i = 0; i < n; i++) {
        float d = fabsf(got[i] - want[i]);
        if (!(d <= atol + rtol * fabsf(want[i]))) {
            if (bad < 5) fprintf(stderr, "  [%zu] got %.8g, expected %.8g\n", i, got[i], want[i]);
            bad++;
        }
    }
    return bad;
}

/* The entry points a test drives, typed with the signatures of the ONNXIFI 1.0 header. */
struct test_api {
    onnxStatus (*getBackendIDs)(onnxBackendID *, size_t *);
    onnxStatus (*releaseBackendID)(onnxBackendID);
    onnxStatus (*getBackendInfo)(onnxBackendID, onnxBackendInfo, void *, size_t *);
    onnxStatus (*getBackendCompatibility)(onnxBackendID, size_t, const void *);
    onnxStatus (*initBackend)(onnxBackendID, const uint64_t *, onnxBackend *);
    onnxStatus (*releaseBackend)(onnxBackend);
    onnxStatus (*initEvent)(onnxBackend, onnxEvent *);
    onnxStatus (*signalEvent)(onnxEvent);
    onnxStatus (*getEventState)(onnxEvent, onnxEventState *);
    onnxStatus (*waitEvent)(onnxEvent);
    onnxStatus (*releaseEvent)(onnxEvent);
    onnxStatus (*initGraph)(onnxBackend, const uint64_t *, size_t, const void *, uint32_t,
                            const onnxTensorDescriptorV1 *, onnxGraph *);
    onnxStatus (*setGraphIO)(onnxGraph, uint32_t, const onnxTensorDescriptorV1 *, uint32_t,
                             const onnxTensorDescriptorV1 *);
    onnxStatus (*runGraph)(onnxGraph, const onnxMemoryFenceV1 *, onnxMemoryFenceV1 *);
    onnxStatus (*releaseGraph)(onnxGraph);
};

#define TEST_IN_ELEMS (1 * 3 * 16 * 16)
#define TEST_OUT_ELEMS (1 * 10)

/* Values written out here (not taken from the header under test). */
#define T_SUCCESS 0x0000
#define T_FALLBACK 0x0001
#define T_TAG_TENSOR 0x43DFBF69
#define T_TAG_FENCE 0x23E08AAB
#define T_FENCE_EVENT 0
#define T_MEM_CPU 0
#define T_FLOAT32 1
#define T_STATE_SIGNALLED 0x3395
#define T_STATE_NONSIGNALLED 0x16BD
#define T_DEVICE_CPU 0x08
#define T_INFO_NAME 1
#define T_INFO_DEVICE 5
#define T_INFO_DEVICE_TYPE 6
#define T_INFO_ONNXIFI_VERSION 0
#define T_PROP_LOG_LEVEL 2
#define T_LOG_WARNING 3

/* Fills a CPU float32 tensor descriptor. */
static void test_descriptor(onnxTensorDescriptorV1 *d, const char *name, uint32_t rank,
                            const uint64_t *shape, float *buffer) {
    memset(d, 0, sizeof(*d));
    d->tag = T_TAG_TENSOR;
    d->name = name;
    d->dataType = T_FLOAT32;
    d->memoryType = T_MEM_CPU;
    d->dimensions = rank;
    d->shape = shape;
    d->buffer = (onnxPointer)(uintptr_t)buffer;
}

/*
 * The whole documented sequence on the small CNN, `runs` runs on one graph:
 * IDs (size protocol) -> info -> compatibility -> init backend -> init graph -> set IO ->
 * for each run { init input event -> run -> write the input and signal AFTER the run call
 * returned -> wait -> state -> compare -> release events } -> release graph, backend, IDs.
 */
static inline void test_full_sequence(const struct test_api *api, const char *model_path,
                               const float *expected, int runs) {
    size_t n = 0, i, model_size = 0, size;
    onnxBackendID *ids;
    onnxBackend backend = NULL;
    onnxGraph graph = NULL;
    char name[256];
    uint64_t u64 = 0;
    void *model;
    static const uint64_t in_shape[4] = {1, 3, 16, 16}, out_shape[2] = {1, 10};
    float *input = (float *)calloc(TEST_IN_ELEMS, sizeof(float));
    float *output = (float *)calloc(TEST_OUT_ELEMS, sizeof(float));
    uint64_t props[3] = {T_PROP_LOG_LEVEL, T_LOG_WARNING, 0};
    int r;

    /* 1. backend IDs with the two-call size protocol */
    EXPECT_STATUS(api->getBackendIDs(NULL, &n), T_FALLBACK);
    EXPECT(n >= 1, "no backend reported (n = %zu)", n);
    if (n < 1) {
        free(input);
        free(output);
        return;
    }
    ids = (onnxBackendID *)calloc(n, sizeof(onnxBackendID));
    size = n;
    EXPECT_STATUS(api->getBackendIDs(ids, &size), T_SUCCESS);
    EXPECT(size == n, "second call reported %zu backends, first %zu", size, n);

    /* 2. info queries */
    size = 0;
    EXPECT_STATUS(api->getBackendInfo(ids[0], T_INFO_NAME, NULL, &size), T_FALLBACK);
    EXPECT(size > 1 && size <= sizeof(name), "name size %zu", size);
    size = sizeof(name);
    memset(name, 'x', sizeof(name));
    EXPECT_STATUS(api->getBackendInfo(ids[0], T_INFO_NAME, name, &size), T_SUCCESS);
    EXPECT(size >= 1 && size <= sizeof(name) && name[size - 1] == '\0' && strlen(name) == size - 1,
           "name not NUL-terminated within the reported size %zu", size);
    size = sizeof(u64);
    EXPECT_STATUS(api->getBackendInfo(ids[0], T_INFO_DEVICE_TYPE, &u64, &size), T_SUCCESS);
    EXPECT(size == 8 && u64 == T_DEVICE_CPU, "device type %llu size %zu", (unsigned long long)u64,
           size);
    size = sizeof(u64);
    EXPECT_STATUS(api->getBackendInfo(ids[0], T_INFO_ONNXIFI_VERSION, &u64, &size), T_SUCCESS);
    EXPECT(u64 == ((uint64_t)1 << 32), "ONNXIFI version 0x%llx", (unsigned long long)u64);

    /* 3. compatibility; 4. backend */
    model = test_read_file(model_path, &model_size);
    EXPECT_STATUS(api->getBackendCompatibility(ids[0], model_size, model), T_SUCCESS);
    EXPECT_STATUS(api->initBackend(ids[0], props, &backend), T_SUCCESS);
    if (backend == NULL) {
        fprintf(stderr, "no backend, stopping\n");
        test_failures++;
        free(model);
        goto release_ids;
    }

    /* 5. graph; the model bytes are freed (and scribbled over) right after the call */
    EXPECT_STATUS(api->initGraph(backend, NULL, model_size, model, 0, NULL, &graph), T_SUCCESS);
    memset(model, 0xA5, model_size);
    free(model);
    if (graph == NULL) {
        fprintf(stderr, "no graph, stopping\n");
        test_failures++;
        goto release_backend;
    }

    /* 6. IO, with names and shapes in memory that is invalidated right after the call */
    {
        onnxTensorDescriptorV1 in, out;
        char *in_name = (char *)malloc(16), *out_name = (char *)malloc(16);
        uint64_t *ish = (uint64_t *)malloc(sizeof(in_shape));
        uint64_t *osh = (uint64_t *)malloc(sizeof(out_shape));
        strcpy(in_name, "input");
        strcpy(out_name, "probs");
        memcpy(ish, in_shape, sizeof(in_shape));
        memcpy(osh, out_shape, sizeof(out_shape));
        test_descriptor(&in, in_name, 4, ish, input);
        test_descriptor(&out, out_name, 2, osh, output);
        EXPECT_STATUS(api->setGraphIO(graph, 1, &in, 1, &out), T_SUCCESS);
        memset(in_name, 0, 16);
        memset(out_name, 0, 16);
        memset(ish, 0xFF, sizeof(in_shape));
        memset(osh, 0xFF, sizeof(out_shape));
        free(in_name);
        free(out_name);
        free(ish);
        free(osh);
    }

    for (r = 0; r < runs; r++) {
        onnxMemoryFenceV1 in_fence, out_fence;
        onnxEventState state = 0;
        onnxEvent junk = (onnxEvent)(uintptr_t)0x1234;
        memset(input, 0, TEST_IN_ELEMS * sizeof(float));
        for (i = 0; i < TEST_OUT_ELEMS; i++) output[i] = -1.0f;
        memset(&in_fence, 0, sizeof(in_fence));
        in_fence.tag = T_TAG_FENCE;
        in_fence.type = T_FENCE_EVENT;
        EXPECT_STATUS(api->initEvent(backend, &in_fence.event), T_SUCCESS);
        state = 0;
        EXPECT_STATUS(api->getEventState(in_fence.event, &state), T_SUCCESS);
        EXPECT(state == T_STATE_NONSIGNALLED, "fresh input event state 0x%x", (unsigned)state);
        memset(&out_fence, 0, sizeof(out_fence));
        out_fence.tag = T_TAG_FENCE;
        out_fence.type = T_FENCE_EVENT;
        out_fence.event = junk; /* the backend must overwrite whatever is there */
        EXPECT_STATUS(api->runGraph(graph, &in_fence, &out_fence), T_SUCCESS);
        EXPECT(out_fence.event != junk && out_fence.event != NULL,
               "onnxRunGraph did not store a fresh output event");
        /* the inputs become valid only now, after onnxRunGraph returned */
        test_fill_input(input, TEST_IN_ELEMS);
        EXPECT_STATUS(api->signalEvent(in_fence.event), T_SUCCESS);
        if (out_fence.event != junk && out_fence.event != NULL) {
            EXPECT_STATUS(api->waitEvent(out_fence.event), T_SUCCESS);
            state = 0;
            EXPECT_STATUS(api->getEventState(out_fence.event, &state), T_SUCCESS);
            EXPECT(state == T_STATE_SIGNALLED, "output event state 0x%x after wait",
                   (unsigned)state);
            if (test_compare(output, expected, TEST_OUT_ELEMS, 1e-5f, 1e-4f) != 0) {
                fprintf(stderr, "run %d: output differs from onnxruntime's\n", r);
                test_failures++;
            }
            EXPECT_STATUS(api->releaseEvent(out_fence.event), T_SUCCESS);
        }
        EXPECT_STATUS(api->releaseEvent(in_fence.event), T_SUCCESS);
    }

    EXPECT_STATUS(api->releaseGraph(graph), T_SUCCESS);
release_backend:
    EXPECT_STATUS(api->releaseBackend(backend), T_SUCCESS);
release_ids:
    for (i = 0; i < n; i++) EXPECT_STATUS(api->releaseBackendID(ids[i]), T_SUCCESS);
    free(ids);
    free(input);
    free(output);
}

/* Reads the expected output file (raw little-endian float32, TEST_OUT_ELEMS values). */
static float *test_read_expected(const char *path) {
    size_t size = 0;
    float *e = (float *)test_read_file(path, &size);
    if (size != TEST_OUT_ELEMS * sizeof(float)) {
        fprintf(stderr, "%s holds %zu bytes, expected %zu\n", path, size,
                (size_t)(TEST_OUT_ELEMS * sizeof(float)));
        exit(2);
    }
    return e;
}

#endif
