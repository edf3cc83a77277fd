// libzstd from Debian's libzstd-dev. ZSTD_STATIC_LINKING_ONLY is not needed: only the stable API is used.
#include <zstd.h>
