/* For Lifeline itself, not for plugins: the text of lifeline_plugin.h, built into the host. */
#ifndef LIFELINE_PLUGIN_HOST_H
#define LIFELINE_PLUGIN_HOST_H
#include <stddef.h>
const char *lifeline_plugin_header_text(size_t *length);
#endif
