/* Compiles the public header as strict C99 (see CMakeLists.txt). */
#include "gearbx.h"

int gb_header_c99_probe(void);
int gb_header_c99_probe(void) {
  gb_session_options o;
  gb_session_options_init(&o);
  return (int)o.struct_size + GB_VERSION_NUMBER + (int)GB_OK;
}
