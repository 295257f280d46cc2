// The header's text, built into the host, so that `lifeline --include-dir` can give a folder
// with the very header this lifeline was built with even when the sources are gone.
#include "lifeline_plugin.h"
#include "lifeline_plugin_host.h"

#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wc23-extensions"
static const char header[] = {
#embed "include/lifeline_plugin.h"
    , 0};
#pragma clang diagnostic pop

const char *lifeline_plugin_header_text(size_t *length) {
    if (length) *length = sizeof header - 1;
    return header;
}
