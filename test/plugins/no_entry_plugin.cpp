// A shared library that is not a mambarl plugin: it loads, but exports no
// mambarl_plugin_register.
#include "plugin/mambarl_plugin.h"

extern "C" MAMBARL_PLUGIN_EXPORT int mambarl_test_not_a_plugin() { return 0; }
