/*
 * loader_test: loads the library as a framework does, through the OFFICIAL onnxifi_loader.c
 * (compiled at test time) with onnxifi_load(ONNXIFI_LOADER_FLAG_VERSION_1_0, NULL, &lib), so
 * that dlopen("libonnxifi.so", RTLD_NOW | RTLD_LOCAL) finds the symlink run-c-tests.sh puts on
 * LD_LIBRARY_PATH, then runs the small CNN through the loaded function pointers.
 * Built twice: plain (15 symbols) and with ONNXIFI_ENABLE_EXT (16 symbols; then the
 * onnxSetIOAndRunGraph extension is also exercised).
 *
 * usage: loader_test MODEL EXPECTED.bin
 */
#include "onnx/onnxifi_loader.h"

#include "common.h"

#ifdef ONNXIFI_ENABLE_EXT
/* Runs the model once through onnxSetIOAndRunGraph obtained from the extension lookup. */
static void run_through_extension(const struct onnxifi_library *lib, const char *model_path,
                                  const float *expected) {
    size_t n = 1, model_size = 0;
    onnxBackendID id = NULL;
    onnxBackend backend = NULL;
    onnxGraph graph = NULL;
    onnxExtensionFunctionPointer fn = NULL;
    onnxSetIOAndRunGraphFunction set_io_and_run;
    void *model = test_read_file(model_path, &model_size);
    static const uint64_t in_shape[4] = {1, 3, 16, 16}, out_shape[2] = {1, 10};
    float *input = (float *)calloc(TEST_IN_ELEMS, sizeof(float));
    float output[TEST_OUT_ELEMS];
    onnxTensorDescriptorV1 in, out;
    onnxMemoryFenceV1 fence;
    int names;
    static const char *const spellings[2] = {"onnxSetIOAndRunGraph",
                                             "onnxSetIOAndRunGraphFunction"};

    EXPECT_STATUS(lib->onnxGetBackendIDs(&id, &n), T_SUCCESS);
    EXPECT_STATUS(lib->onnxInitBackend(id, NULL, &backend), T_SUCCESS);
    EXPECT_STATUS(lib->onnxInitGraph(backend, NULL, model_size, model, 0, NULL, &graph),
                  T_SUCCESS);
    free(model);
    test_fill_input(input, TEST_IN_ELEMS);
    test_descriptor(&in, "input", 4, in_shape, input);
    test_descriptor(&out, "probs", 2, out_shape, output);
    for (names = 0; names < 2 && graph != NULL; names++) {
        fn = NULL;
        EXPECT_STATUS(lib->onnxGetExtensionFunctionAddress(id, spellings[names], &fn), T_SUCCESS);
        if (fn == NULL) {
            fprintf(stderr, "no %s\n", spellings[names]);
            test_failures++;
            continue;
        }
        memcpy(&set_io_and_run, &fn, sizeof(fn));
        memset(output, 0, sizeof(output));
        memset(&fence, 0, sizeof(fence));
        fence.tag = T_TAG_FENCE;
        fence.type = T_FENCE_EVENT;
        EXPECT_STATUS(set_io_and_run(graph, 1, &in, 1, &out, &fence), T_SUCCESS);
        if (fence.event != NULL) {
            EXPECT_STATUS(lib->onnxWaitEvent(fence.event), T_SUCCESS);
            if (test_compare(output, expected, TEST_OUT_ELEMS, 1e-5f, 1e-4f) != 0) {
                fprintf(stderr, "%s: output differs from onnxruntime's\n", spellings[names]);
                test_failures++;
            }
            EXPECT_STATUS(lib->onnxReleaseEvent(fence.event), T_SUCCESS);
        } else {
            fprintf(stderr, "%s stored no output event\n", spellings[names]);
            test_failures++;
        }
    }
    fn = (onnxExtensionFunctionPointer)1;
    EXPECT_STATUS(lib->onnxGetExtensionFunctionAddress(id, "onnxNoSuchFunction", &fn), 0x0301);
    EXPECT(fn == NULL, "failed lookup left *function non-NULL");
    if (graph != NULL) EXPECT_STATUS(lib->onnxReleaseGraph(graph), T_SUCCESS);
    if (backend != NULL) EXPECT_STATUS(lib->onnxReleaseBackend(backend), T_SUCCESS);
    EXPECT_STATUS(lib->onnxReleaseBackendID(id), T_SUCCESS);
    free(input);
}
#endif

int main(int argc, char **argv) {
    struct onnxifi_library lib;
    struct test_api api;
    float *expected;
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL EXPECTED.bin\n", argv[0]);
        return 2;
    }
    expected = test_read_expected(argv[2]);
    if (!onnxifi_load(ONNXIFI_LOADER_FLAG_VERSION_1_0, NULL, &lib)) {
        fprintf(stderr, "onnxifi_load(VERSION_1_0, NULL) failed: libonnxifi.so not found or a "
                        "symbol is missing (%d expected)\n",
                ONNXIFI_LOADER_FUNCTION_COUNT);
        return 1;
    }
    api.getBackendIDs = lib.onnxGetBackendIDs;
    api.releaseBackendID = lib.onnxReleaseBackendID;
    api.getBackendInfo = lib.onnxGetBackendInfo;
    api.getBackendCompatibility = lib.onnxGetBackendCompatibility;
    api.initBackend = lib.onnxInitBackend;
    api.releaseBackend = lib.onnxReleaseBackend;
    api.initEvent = lib.onnxInitEvent;
    api.signalEvent = lib.onnxSignalEvent;
    api.getEventState = lib.onnxGetEventState;
    api.waitEvent = lib.onnxWaitEvent;
    api.releaseEvent = lib.onnxReleaseEvent;
    api.initGraph = lib.onnxInitGraph;
    api.setGraphIO = lib.onnxSetGraphIO;
    api.runGraph = lib.onnxRunGraph;
    api.releaseGraph = lib.onnxReleaseGraph;
    test_full_sequence(&api, argv[1], expected, 2);
#ifdef ONNXIFI_ENABLE_EXT
    run_through_extension(&lib, argv[1], expected);
#endif
    onnxifi_unload(&lib);
    free(expected);
    if (test_failures != 0) {
        fprintf(stderr, "loader_test: %d failure(s)\n", test_failures);
        return 1;
    }
    printf("loader_test: OK (%d symbols loaded)\n", ONNXIFI_LOADER_FUNCTION_COUNT);
    return 0;
}
