// header_cxx: include/onnxifi.h compiled as C++ (g++ -Wall -Wextra -Werror) and linked against
// the library: the declarations must be extern "C" (or the link fails on mangled names) and
// must not trip C++ warnings.
#include "onnxifi.h"

#include <cstdio>

int main() {
    size_t n = 0;
    onnxStatus s = onnxGetBackendIDs(nullptr, &n);
    onnxTensorDescriptorV1 d = {};
    onnxMemoryFenceV1 f = {};
    d.tag = ONNXIFI_TAG_TENSOR_DESCRIPTOR_V1;
    f.tag = ONNXIFI_TAG_MEMORY_FENCE_V1;
    onnxExtensionFunctionPointer fp = nullptr;
    (void)fp;
    if (s != ONNXIFI_STATUS_FALLBACK || n < 1 || sizeof(d) != 56 || sizeof(f) != 24) {
        std::printf("header_cxx: status 0x%x n %zu sizes %zu %zu\n", (unsigned)s, n, sizeof(d),
                    sizeof(f));
        return 1;
    }
    std::printf("header_cxx: OK\n");
    return 0;
}
