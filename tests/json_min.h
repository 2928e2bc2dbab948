// json_min.h — the tests' names for the tool's JSON reader
// (examples/cli/json_min.h), so one reader serves the CLI and the tests.
#pragma once

#include "../examples/cli/json_min.h"

namespace gbt {
using gbjson::Json;
using gbjson::JsonReader;
}  // namespace gbt
