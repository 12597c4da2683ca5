/* Stands for libnvrtc-builtins.so.13.0 (see fake_nvrtc.c): only its soname
 * matters. */
int kiln_fake_nvrtc_builtins(void) { return 13; }
