/* The C ABI of librmm_rs.so, under the name the drop-in C++ API (<rmm/...>) uses: see <rmm_rs/rmm_c.h>. */
#include <rmm_rs/rmm_c.h>
