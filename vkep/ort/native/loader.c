/* The library ORT loads (vkep.get_library_path()). vkep's kernels run in Python, and its plugin module
 * (_vkep_plugin, a cffi embedding module) is not linked to libpython: in a Python process the interpreter's
 * symbols are already there. A C or C++ host has none, so this loader first loads libpython by its name (the
 * dynamic loader's search path: the system's libpython, or LD_LIBRARY_PATH), then the plugin module beside it,
 * and hands ORT's two entry points to it. Built by vkep/build.py with VKEP_PLUGIN_FILE and VKEP_LIBPYTHON
 * (file names, never paths of the build machine). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr */
#endif
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "ort_abi.h"

typedef OrtStatus* (*create_t)(const char*, const OrtApiBase*, const OrtLogger*, OrtEpFactory**, size_t, size_t*);
typedef OrtStatus* (*release_t)(OrtEpFactory*);

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static create_t g_create = NULL;
static release_t g_release = NULL;
static char g_error[1024];

static OrtStatus* fail(const OrtApiBase* base, const char* msg) {
    const OrtApi* api = base ? base->GetApi(1) : NULL; /* CreateStatus is slot 0 in every API version */
    if (!api) return NULL;
    typedef OrtStatus* (*create_status_t)(int, const char*);
    return ((create_status_t)((void* const*)api)[0])(1, msg);
}

/* 0 when the plugin module's entry points are bound, else g_error says why */
static int load_plugin(void) {
    if (g_create) return 0;
    if (!dlsym(RTLD_DEFAULT, "Py_IsInitialized") && !dlopen(VKEP_LIBPYTHON, RTLD_NOW | RTLD_GLOBAL)) {
        snprintf(g_error, sizeof g_error,
                 "vkep: vkep's kernels run in Python, and this process has none: %s could not be loaded (%s). "
                 "Install the Python %s runtime library (Debian/Ubuntu: libpython3.x for the Python vkep is "
                 "installed for; Fedora: python3-libs), or add its directory to LD_LIBRARY_PATH",
                 VKEP_LIBPYTHON, dlerror(), VKEP_LIBPYTHON);
        return -1;
    }
    Dl_info self;
    if (!dladdr((void*)load_plugin, &self) || !self.dli_fname) {
        snprintf(g_error, sizeof g_error, "vkep: the loader cannot find its own file");
        return -1;
    }
    char path[4096];
    const char* slash = strrchr(self.dli_fname, '/');
    int dir_len = slash ? (int)(slash - self.dli_fname) : 1;
    snprintf(path, sizeof path, "%.*s/%s", dir_len, slash ? self.dli_fname : ".", VKEP_PLUGIN_FILE);
    void* plugin = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!plugin) {
        snprintf(g_error, sizeof g_error, "vkep: its plugin module could not be loaded: %s", dlerror());
        return -1;
    }
    g_release = (release_t)dlsym(plugin, "ReleaseEpFactory");
    g_create = (create_t)dlsym(plugin, "CreateEpFactories");
    if (!g_create || !g_release) {
        g_create = NULL;
        snprintf(g_error, sizeof g_error, "vkep: %s lacks ORT's plugin entry points", path);
        return -1;
    }
    return 0;
}

__attribute__((visibility("default")))
OrtStatus* CreateEpFactories(const char* registered_name, const OrtApiBase* base, const OrtLogger* logger,
                             OrtEpFactory** factories, size_t max_factories, size_t* num_factories) {
    *num_factories = 0;
    pthread_mutex_lock(&g_lock);
    int failed = load_plugin();
    pthread_mutex_unlock(&g_lock);
    if (failed) return fail(base, g_error);
    return g_create(registered_name, base, logger, factories, max_factories, num_factories);
}

__attribute__((visibility("default")))
OrtStatus* ReleaseEpFactory(OrtEpFactory* factory) {
    return g_release ? g_release(factory) : NULL;
}
