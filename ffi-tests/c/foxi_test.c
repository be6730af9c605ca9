/*
 * foxi_test: libonnxifi-rust-foxi.so (cargo feature `foxi`) against the foxi dialect of
 * ONNXIFI, as described below from foxi's onnxifi.h / onnxifi_ext.h (layouts, constants and
 * prototypes written out here, not taken from the header under test), then the small CNN
 * run through the 9-argument onnxInitGraph and the 7-argument onnxSetIOAndRunGraph with a
 * trace-event list.
 *
 * usage: foxi_test MODEL INPUT.bin EXPECTED.bin
 */
#include "onnxifi-foxi.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* foxi's tensor descriptor on 64-bit targets: the ONNXIFI 1.0 fields, then quantizationAxis,
 * quantizationParams, scales, biases and isOffline before buffer: 96 bytes. */
_Static_assert(sizeof(onnxTensorDescriptorV1) == 96, "descriptor size");
_Static_assert(offsetof(onnxTensorDescriptorV1, tag) == 0, "tag");
_Static_assert(offsetof(onnxTensorDescriptorV1, name) == 8, "name");
_Static_assert(offsetof(onnxTensorDescriptorV1, dataType) == 16, "dataType");
_Static_assert(offsetof(onnxTensorDescriptorV1, memoryType) == 24, "memoryType");
_Static_assert(offsetof(onnxTensorDescriptorV1, dimensions) == 32, "dimensions");
_Static_assert(offsetof(onnxTensorDescriptorV1, shape) == 40, "shape");
_Static_assert(offsetof(onnxTensorDescriptorV1, quantizationAxis) == 48, "quantizationAxis");
_Static_assert(offsetof(onnxTensorDescriptorV1, quantizationParams) == 56, "quantizationParams");
_Static_assert(offsetof(onnxTensorDescriptorV1, scales) == 64, "scales");
_Static_assert(offsetof(onnxTensorDescriptorV1, biases) == 72, "biases");
_Static_assert(offsetof(onnxTensorDescriptorV1, isOffline) == 80, "isOffline");
_Static_assert(offsetof(onnxTensorDescriptorV1, buffer) == 88, "buffer");
_Static_assert(sizeof(onnxMemoryFenceV1) == 24, "fence");
/* onnxTraceEvent: a 33-character name, a type character, then timestamp, tid, duration. */
_Static_assert(sizeof(onnxTraceEvent) == 64, "trace event size");
_Static_assert(offsetof(onnxTraceEvent, eventType) == 33, "eventType");
_Static_assert(offsetof(onnxTraceEvent, timestamp) == 40, "timestamp");
_Static_assert(offsetof(onnxTraceEvent, tid) == 48, "tid");
_Static_assert(offsetof(onnxTraceEvent, duration) == 56, "duration");
_Static_assert(sizeof(onnxTraceEventList) == 16, "trace event list");
_Static_assert(offsetof(onnxTraceEventList, traceEvents) == 8, "traceEvents");
_Static_assert(ONNXIFI_TRACE_EVENT_NAME_SIZE == 32, "name size");
_Static_assert(ONNXIFI_STATUS_FATAL_ERROR == 0x0407, "FATAL_ERROR");
_Static_assert(ONNXIFI_STATUS_INTERNAL_ERROR == 0x0406, "INTERNAL_ERROR");
_Static_assert(ONNXIFI_TAG_TENSOR_DESCRIPTOR_V1 == 0x43DFBF69, "descriptor tag");

/* foxi's prototypes: assigning the exports to these types fails to compile on a mismatch. */
typedef onnxStatus (*foxi_init_graph)(onnxBackend, const uint64_t *, size_t, const void *,
                                      uint32_t, const onnxTensorDescriptorV1 *, onnxGraph *,
                                      uint32_t, void *);
typedef onnxStatus (*foxi_set_io_and_run)(onnxGraph, uint32_t, const onnxTensorDescriptorV1 *,
                                          uint32_t, const onnxTensorDescriptorV1 *,
                                          onnxMemoryFenceV1 *, onnxTraceEventList *);
typedef onnxStatus (*foxi_release_trace_events)(onnxTraceEventList *);
typedef onnxStatus (*foxi_wait_event_for)(onnxEvent, uint32_t, onnxEventState *, onnxStatus *,
                                          char *, size_t *);
static const foxi_init_graph init_graph = onnxInitGraph;
static const foxi_set_io_and_run set_io_and_run = onnxSetIOAndRunGraph;
static const foxi_release_trace_events release_trace_events = onnxReleaseTraceEvents;
static const foxi_wait_event_for wait_event_for = onnxWaitEventFor;

static int failures = 0;
#define CHECK(cond, ...)                                       \
    do {                                                       \
        if (!(cond)) {                                         \
            fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);    \
            fprintf(stderr, __VA_ARGS__);                      \
            fprintf(stderr, "\n");                             \
            failures++;                                        \
        }                                                      \
    } while (0)

static void *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); exit(2); }
    fseek(f, 0, SEEK_END);
    *size = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    void *data = malloc(*size ? *size : 1);
    if (fread(data, 1, *size, f) != *size) { perror(path); exit(2); }
    fclose(f);
    return data;
}

static void describe(onnxTensorDescriptorV1 *d, const char *name, uint32_t rank,
                     const uint64_t *shape, float *buffer) {
    memset(d, 0, sizeof(*d));
    d->tag = ONNXIFI_TAG_TENSOR_DESCRIPTOR_V1;
    d->name = name;
    d->dataType = ONNXIFI_DATATYPE_FLOAT32;
    d->memoryType = ONNXIFI_MEMORY_TYPE_CPU;
    d->dimensions = rank;
    d->shape = shape;
    d->buffer = (onnxPointer)(uintptr_t)buffer;
}

/* One run through onnxSetIOAndRunGraph; the output compared with the expected values. */
static void run(onnxGraph graph, const onnxTensorDescriptorV1 *in, onnxTensorDescriptorV1 *out,
                float *output, const float *expected, onnxTraceEventList *trace) {
    onnxMemoryFenceV1 fence;
    memset(&fence, 0, sizeof(fence));
    fence.tag = ONNXIFI_TAG_MEMORY_FENCE_V1;
    fence.type = ONNXIFI_SYNCHRONIZATION_EVENT;
    memset(output, 0, 10 * sizeof(float));
    onnxStatus s = set_io_and_run(graph, 1, in, 1, out, &fence, trace);
    CHECK(s == ONNXIFI_STATUS_SUCCESS, "onnxSetIOAndRunGraph: 0x%x", s);
    if (s != ONNXIFI_STATUS_SUCCESS) return;
    onnxEventState state = 0;
    onnxStatus status = -1;
    char message[256];
    size_t length = sizeof(message);
    s = wait_event_for(fence.event, 0, &state, &status, message, &length);
    CHECK(s == ONNXIFI_STATUS_SUCCESS && status == ONNXIFI_STATUS_SUCCESS,
          "wait: 0x%x, run status 0x%x", s, status);
    CHECK(onnxReleaseEvent(fence.event) == ONNXIFI_STATUS_SUCCESS, "release event");
    for (int i = 0; i < 10; i++) {
        CHECK(fabsf(output[i] - expected[i]) <= 1e-5f + 1e-4f * fabsf(expected[i]),
              "output[%d] = %g, expected %g", i, output[i], expected[i]);
    }
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s MODEL INPUT.bin EXPECTED.bin\n", argv[0]);
        return 2;
    }
    size_t model_size = 0, in_size = 0, want_size = 0;
    void *model = read_file(argv[1], &model_size);
    float *input = read_file(argv[2], &in_size);
    float *expected = read_file(argv[3], &want_size);
    if (in_size != 3 * 16 * 16 * sizeof(float) || want_size != 10 * sizeof(float)) return 2;
    float output[10];

    onnxBackendID id = NULL;
    size_t n = 1;
    onnxBackend backend = NULL;
    onnxGraph graph = NULL;
    CHECK(onnxGetBackendIDs(&id, &n) == ONNXIFI_STATUS_SUCCESS, "IDs");
    CHECK(onnxInitBackend(id, NULL, &backend) == ONNXIFI_STATUS_SUCCESS, "backend");

    /* A deferred weight reader is refused; the out-handle stays NULL. */
    int reader = 0;
    onnxStatus s = init_graph(backend, NULL, model_size, model, 0, NULL, &graph, 128, &reader);
    CHECK(s == ONNXIFI_STATUS_UNSUPPORTED_PROPERTY && graph == NULL,
          "deferred weight reader: 0x%x", s);
    s = init_graph(backend, NULL, model_size, model, 0, NULL, &graph, 128, NULL);
    CHECK(s == ONNXIFI_STATUS_SUCCESS && graph != NULL, "onnxInitGraph (9 arguments): 0x%x", s);
    if (s != ONNXIFI_STATUS_SUCCESS) return 1;

    static const uint64_t in_shape[4] = {1, 3, 16, 16}, out_shape[2] = {1, 10};
    onnxTensorDescriptorV1 in, out;
    describe(&in, "input", 4, in_shape, input);
    describe(&out, "probs", 2, out_shape, output);

    /* A run with its timeline: every operator of the graph and the copies, 'X' events with
     * epoch timestamps. */
    onnxTraceEventList trace = {0, NULL};
    run(graph, &in, &out, output, expected, &trace);
    CHECK(trace.numEvents >= 4 && trace.traceEvents != NULL, "%llu trace events",
          (unsigned long long)trace.numEvents);
    int conv = 0, copies = 0, runs = 0;
    for (uint64_t i = 0; i < trace.numEvents; i++) {
        const onnxTraceEvent *e = trace.traceEvents[i];
        CHECK(e->eventType == 'X', "event %llu type %c", (unsigned long long)i, e->eventType);
        CHECK(e->eventName[ONNXIFI_TRACE_EVENT_NAME_SIZE] == 0, "name not terminated");
        CHECK(e->timestamp > 1600000000000000ull, "timestamp %llu", (unsigned long long)e->timestamp);
        conv += strcmp(e->eventName, "FusedConv") == 0;
        copies += strncmp(e->eventName, "copy ", 5) == 0;
        runs += strcmp(e->eventName, "run") == 0;
    }
    CHECK(conv == 2 && copies == 2 && runs == 1, "FusedConv %d, copies %d, run %d", conv,
          copies, runs);
    CHECK(release_trace_events(&trace) == ONNXIFI_STATUS_SUCCESS, "release trace events");
    CHECK(trace.numEvents == 0 && trace.traceEvents == NULL, "the list is emptied");
    /* Events this library did not allocate are refused. */
    onnxTraceEvent mine;
    onnxTraceEvent *mine_p = &mine;
    onnxTraceEventList foreign = {1, &mine_p};
    CHECK(release_trace_events(&foreign) == ONNXIFI_STATUS_INVALID_POINTER, "foreign list");
    CHECK(release_trace_events(NULL) == ONNXIFI_STATUS_INVALID_POINTER, "NULL list");

    /* Without a list, and again with one, the same outputs. */
    run(graph, &in, &out, output, expected, NULL);

    /* A quantized descriptor is refused before anything runs. */
    onnxTensorDescriptorV1 quantized = in;
    float scale = 0.5f;
    int32_t zero = 0;
    quantized.quantizationParams = 1;
    quantized.scales = &scale;
    quantized.biases = &zero;
    onnxMemoryFenceV1 fence;
    memset(&fence, 0, sizeof(fence));
    fence.tag = ONNXIFI_TAG_MEMORY_FENCE_V1;
    fence.type = ONNXIFI_SYNCHRONIZATION_EVENT;
    s = set_io_and_run(graph, 1, &quantized, 1, &out, &fence, NULL);
    CHECK(s == ONNXIFI_STATUS_UNSUPPORTED_DATATYPE && fence.event == NULL, "quantized: 0x%x", s);

    onnxExtensionFunctionPointer f = NULL;
    CHECK(onnxGetExtensionFunctionAddress(id, "onnxReleaseTraceEventsFunction", &f) ==
              ONNXIFI_STATUS_SUCCESS && (void *)f == (void *)release_trace_events,
          "extension lookup");

    CHECK(onnxReleaseGraph(graph) == ONNXIFI_STATUS_SUCCESS, "release graph");
    CHECK(onnxReleaseBackend(backend) == ONNXIFI_STATUS_SUCCESS, "release backend");
    CHECK(onnxReleaseBackendID(id) == ONNXIFI_STATUS_SUCCESS, "release ID");
    free(model);
    free(input);
    free(expected);
    if (failures) {
        fprintf(stderr, "foxi_test: %d failure(s)\n", failures);
        return 1;
    }
    printf("foxi_test: OK\n");
    return 0;
}
