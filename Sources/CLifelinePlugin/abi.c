// The header is the target; this file only gives SwiftPM a C source to build it from.
#include "lifeline_plugin.h"
