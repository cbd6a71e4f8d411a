/* Compiled as strict C99: proves rmm_c.h is valid C, and runs a host allocation through the
 * process registry (device 0 in host mode; the current device's resource with a GPU). */
#include <rmm/rmm_c.h>

#include <stdio.h>
#include <string.h>

/* C99 has no _Static_assert: a negative array size fails the build instead. */
typedef char check_error_size[sizeof(rmm_error) == 528 ? 1 : -1];
typedef char check_handle_size[sizeof(rmm_resource) == 2 * sizeof(void*) ? 1 : -1];
typedef char check_vtable_size[sizeof(rmm_resource_vtable) == 8 + 10 * sizeof(void*) ? 1 : -1];

static int failures = 0;

#define CHECK(cond)                                                    \
  do {                                                                 \
    if (!(cond)) {                                                     \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      failures++;                                                      \
    }                                                                  \
  } while (0)

int main(void)
{
  rmm_error err;
  rmm_resource mr = {NULL, NULL};
  void* p = NULL;
  int status;

  CHECK(rmm_abi_version() == RMM_ABI_VERSION);

  status = rmm_get_current_device_resource(&mr, &err);
  CHECK(status == RMM_OK);
  if (status != RMM_OK) {
    fprintf(stderr, "rmm_get_current_device_resource: %s: %s\n", rmm_error_kind_name(status), err.message);
    return 1;
  }
  printf("current device resource: %s (access %u), host mode: %d\n", rmm_resource_name(mr),
         (unsigned)rmm_resource_access(mr), rmm_is_host_mode());

  status = rmm_resource_allocate(mr, NULL, 4096, 256, &p, &err);
  CHECK(status == RMM_OK);
  CHECK(p != NULL && ((size_t)p % 256) == 0);
  if (status == RMM_OK && (rmm_resource_access(mr) & RMM_ACCESS_HOST)) {
    unsigned char* bytes = (unsigned char*)p;
    memset(bytes, 0xab, 4096);
    CHECK(bytes[0] == 0xab && bytes[4095] == 0xab);
  }
  CHECK(rmm_resource_deallocate(mr, NULL, p, 4096, 256, &err) == RMM_OK);

  /* Errors are status codes with details, never crashes. */
  CHECK(rmm_resource_allocate(mr, NULL, 64, 3, &p, &err) == RMM_ERROR_INVALID_ARGUMENT);
  CHECK(err.kind == RMM_ERROR_INVALID_ARGUMENT && strstr(err.message, "power of two") != NULL);
  CHECK(rmm_get_current_device_resource(NULL, &err) == RMM_ERROR_INVALID_ARGUMENT);
  CHECK(rmm_resource_allocate(mr, NULL, 64, 256, NULL, NULL) == RMM_ERROR_INVALID_ARGUMENT);

  rmm_resource_release(mr);
  if (failures == 0) {
    printf("c_abi_smoke: ok\n");
  }
  return failures == 0 ? 0 : 1;
}
