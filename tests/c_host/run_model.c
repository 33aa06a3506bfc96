/* A C host of ONNX Runtime, as an application would be: it loads libonnxruntime, registers vkep's plugin
 * library, runs a model with input x [1,16] (float) on vkep's devices, and prints y. No Python anywhere in it:
 * vkep's loader library must bring the Python runtime itself.
 *   run_model LIBONNXRUNTIME VKEP_LIBRARY MODEL.onnx
 * It declares only the parts of ORT's C API it calls, by their slots in OrtApi (API version 24). */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct OrtApi OrtApi;
typedef struct OrtStatus OrtStatus;
typedef struct OrtApiBase {
    const OrtApi* (*GetApi)(uint32_t version);
    const char* (*GetVersionString)(void);
} OrtApiBase;
typedef void* P; /* every ORT object here is an opaque pointer */

static const void* const* api;
#define SLOT(type, index) ((type)api[index])
static const char* (*GetErrorMessage)(const OrtStatus*);

static int check(OrtStatus* s, const char* what) {
    if (!s) return 0;
    fprintf(stderr, "c_host: %s failed: %s\n", what, GetErrorMessage(s));
    return 1;
}

int main(int argc, char** argv) {
    if (argc != 4) { fprintf(stderr, "usage: run_model LIBONNXRUNTIME VKEP_LIBRARY MODEL\n"); return 2; }
    void* ort = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!ort) { fprintf(stderr, "c_host: %s\n", dlerror()); return 2; }
    const OrtApiBase* (*get_base)(void) = (const OrtApiBase* (*)(void))dlsym(ort, "OrtGetApiBase");
    api = (const void* const*)get_base()->GetApi(24);
    GetErrorMessage = SLOT(const char* (*)(const OrtStatus*), 2);

    P env = NULL, so = NULL, session = NULL, info = NULL, x = NULL, y = NULL;
    if (check(SLOT(OrtStatus* (*)(int, const char*, P*), 3)(2, "c_host", &env), "CreateEnv")) return 1;
    if (check(SLOT(OrtStatus* (*)(P, const char*, const char*), 301)(env, "vkep", argv[2]),
              "RegisterExecutionProviderLibrary")) return 1;
    const P* devices = NULL;
    size_t n = 0, chosen = 0;
    if (check(SLOT(OrtStatus* (*)(P, const P**, size_t*), 303)(env, &devices, &n), "GetEpDevices")) return 1;
    P vkep[8];
    for (size_t i = 0; i < n && chosen < 8; i++)
        if (!strcmp(SLOT(const char* (*)(P), 312)(devices[i]), "VulkanExecutionProvider")) vkep[chosen++] = devices[i];
    printf("vkep devices: %zu\n", chosen);
    if (!chosen) return 1;
    if (check(SLOT(OrtStatus* (*)(P*), 10)(&so), "CreateSessionOptions")) return 1;
    if (check(SLOT(OrtStatus* (*)(P, const char*, const char*), 130)(so, "session.disable_cpu_ep_fallback", "1"),
              "AddSessionConfigEntry")) return 1;
    const char* keys[] = {"allow_cpu_device"};
    const char* values[] = {"1"};
    if (check(SLOT(OrtStatus* (*)(P, P, const P*, size_t, const char* const*, const char* const*, size_t), 304)(
                  so, env, vkep, chosen, keys, values, 1), "SessionOptionsAppendExecutionProvider_V2")) return 1;
    if (check(SLOT(OrtStatus* (*)(P, const char*, P, P*), 7)(env, argv[3], so, &session), "CreateSession")) return 1;
    if (check(SLOT(OrtStatus* (*)(int, int, P*), 69)(0, 0, &info), "CreateCpuMemoryInfo")) return 1;
    float data[16];
    for (int i = 0; i < 16; i++) data[i] = (float)i - 8.0f;
    int64_t shape[2] = {1, 16};
    if (check(SLOT(OrtStatus* (*)(P, void*, size_t, const int64_t*, size_t, int, P*), 49)(
                  info, data, sizeof data, shape, 2, 1, &x), "CreateTensorWithDataAsOrtValue")) return 1;
    const char* in_names[] = {"x"};
    const char* out_names[] = {"y"};
    if (check(SLOT(OrtStatus* (*)(P, P, const char* const*, const P*, size_t, const char* const*, size_t, P*), 9)(
                  session, NULL, in_names, (const P*)&x, 1, out_names, 1, &y), "Run")) return 1;
    float* out = NULL;
    if (check(SLOT(OrtStatus* (*)(P, void**), 51)(y, (void**)&out), "GetTensorMutableData")) return 1;
    printf("y:");
    for (int i = 0; i < 16; i++) printf(" %.6f", out[i]);
    printf("\n");
    SLOT(void (*)(P), 96)(y);
    SLOT(void (*)(P), 96)(x);
    SLOT(void (*)(P), 94)(info);
    SLOT(void (*)(P), 95)(session);
    SLOT(void (*)(P), 100)(so);
    SLOT(void (*)(P), 92)(env);
    return 0;
}
