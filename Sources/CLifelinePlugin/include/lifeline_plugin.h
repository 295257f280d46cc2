/* lifeline_plugin.h: the C ABI of Lifeline's native plugins. (Being written.) */
#ifndef LIFELINE_PLUGIN_H
#define LIFELINE_PLUGIN_H
#define LIFELINE_PLUGIN_API_VERSION 1
#endif
