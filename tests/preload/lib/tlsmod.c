/*
 * tlsmod.c - a library that tests/preload/tls.c dlopens: its __thread
 * variable lives in dynamic TLS (general-dynamic model, __tls_get_addr),
 * one per thread.
 */
__thread int tlsmod_v = 42;

int *tlsmod_var(void);
int *tlsmod_var(void)
{
	return &tlsmod_v;
}
