/*
 * lifecycle: the complete documented ONNXIFI sequence on examples/small_cnn.onnx, calling the
 * library's exported symbols directly (linked with -lonnxifi_rust against include/onnxifi.h).
 * Run under valgrind by run-c-tests.sh.
 *
 * usage: lifecycle MODEL EXPECTED.bin [ROUNDS [RUNS]]
 */
#include "onnxifi.h"

#include "common.h"

int main(int argc, char **argv) {
    struct test_api api;
    float *expected;
    int rounds = 3, runs = 3, i;
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL EXPECTED.bin [ROUNDS [RUNS]]\n", argv[0]);
        return 2;
    }
    if (argc > 3) rounds = atoi(argv[3]);
    if (argc > 4) runs = atoi(argv[4]);
    expected = test_read_expected(argv[2]);

    api.getBackendIDs = onnxGetBackendIDs;
    api.releaseBackendID = onnxReleaseBackendID;
    api.getBackendInfo = onnxGetBackendInfo;
    api.getBackendCompatibility = onnxGetBackendCompatibility;
    api.initBackend = onnxInitBackend;
    api.releaseBackend = onnxReleaseBackend;
    api.initEvent = onnxInitEvent;
    api.signalEvent = onnxSignalEvent;
    api.getEventState = onnxGetEventState;
    api.waitEvent = onnxWaitEvent;
    api.releaseEvent = onnxReleaseEvent;
    api.initGraph = onnxInitGraph;
    api.setGraphIO = onnxSetGraphIO;
    api.runGraph = onnxRunGraph;
    api.releaseGraph = onnxReleaseGraph;

    /* each round is a complete init-to-release cycle */
    for (i = 0; i < rounds; i++) test_full_sequence(&api, argv[1], expected, runs);

    free(expected);
    if (test_failures != 0) {
        fprintf(stderr, "lifecycle: %d failure(s)\n", test_failures);
        return 1;
    }
    printf("lifecycle: OK (%d rounds x %d runs)\n", rounds, runs);
    return 0;
}
