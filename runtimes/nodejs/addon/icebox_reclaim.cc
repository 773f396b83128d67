// icebox_reclaim: the three native calls the Node.js proxy's /icebox/reclaim needs and plain
// JavaScript cannot make (lib/reclaim.js says when each is used).
//
// The module is registered through N-API, but two of its calls go to V8's C++ API, which N-API
// does not cover: the addon is therefore tied to the exact node it was compiled against, and
// build.sh compiles it against the headers shipped with that node (and rebuilds it when the node
// version changes).

#include <malloc.h>
#include <node_api.h>
#include <v8.h>

namespace {

napi_value Undefined(napi_env env) {
  napi_value result;
  napi_get_undefined(env, &result);
  return result;
}

// A full, memory-reducing collection: V8 clears its compilation cache and runs up to seven
// mark-compact GCs with kReduceMemoryFootprint (dead maps and old bytecode are dropped too, and
// the young generation shrinks), the most memory V8 can give back.
napi_value LowMemoryNotification(napi_env env, napi_callback_info) {
  v8::Isolate::GetCurrent()->LowMemoryNotification();
  return Undefined(env);
}

// What a browser tab gets on memory pressure: on the isolate's own thread the collection runs
// before this returns, a kReduceMemoryFootprint mark-compact, repeated once when much garbage
// appears to be left (or turned into incremental marking when the first one took over 50 ms).
napi_value MemoryPressureCritical(napi_env env, napi_callback_info) {
  v8::Isolate::GetCurrent()->MemoryPressureNotification(v8::MemoryPressureLevel::kCritical);
  return Undefined(env);
}

// glibc keeps freed malloc memory in its arenas; malloc_trim(0) returns every free page of
// every arena (not only the top of the main heap) to the kernel. Returns whether any was.
napi_value MallocTrim(napi_env env, napi_callback_info) {
  napi_value result;
  napi_get_boolean(env, malloc_trim(0) != 0, &result);
  return result;
}

}  // namespace

NAPI_MODULE_INIT() {
  const napi_property_descriptor functions[] = {
      {"lowMemoryNotification", nullptr, LowMemoryNotification, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"memoryPressureCritical", nullptr, MemoryPressureCritical, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"mallocTrim", nullptr, MallocTrim, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
  };
  if (napi_define_properties(env, exports, sizeof(functions) / sizeof(functions[0]), functions) != napi_ok) {
    return nullptr;
  }
  return exports;
}
