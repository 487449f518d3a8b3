/*
 * tlsmod.c - a library that tests/preload/tls.c dlopens: its __thread
 * variables live in dynamic TLS (general-dynamic model, __tls_get_addr),
 * one per thread.  Built a second time with -ftls-model=initial-exec
 * (libtlsie.so): then dlopen gives them static TLS, in glibc's surplus.
 */
__thread int tlsmod_v = 42;
__thread unsigned char tlsmod_b[1024] = { 7 }; /* 7, then zeros */

int *tlsmod_var(void);
int *tlsmod_var(void)
{
	return &tlsmod_v;
}

unsigned char *tlsmod_buf(void);
unsigned char *tlsmod_buf(void)
{
	return tlsmod_b;
}
