// port_sigbus.h — the posix port's guard over mapped model files (see
// port_sigbus.cpp). Internal to port/posix.
#pragma once

#include <stddef.h>

// Guard the read-only file mapping [p, p + size): from now on a read of it
// that raises SIGBUS (the file shrank under it, or a page cannot be read
// back) is answered with zeros and marks the guard as faulted, instead of
// ending the process. Installs the process's SIGBUS handler on first use.
// Returns a guard id > 0, or 0 when every slot is taken or the handler
// cannot be installed.
int gb_posix_guard_add(const void *p, size_t size);
// Stop guarding (before the mapping is unmapped). 0 is a no-op.
void gb_posix_guard_remove(int guard);
// 1 once a read of the guarded mapping faulted; 0 before, and for guard 0.
int gb_posix_guard_faulted(int guard);
