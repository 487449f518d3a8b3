/*
 * dlthrb.c - the library tests/preload/dlthread.c dlopens for the IFUNC
 * cases: its relocation against lib/dlthr.c's dlthr_ran (an IFUNC) runs
 * that library's resolver, inside the dlopen, with the loader's locks
 * held.
 */
int dlthr_ran(void);

int (*dlthrb_ranp)(void) = dlthr_ran;

int dlthrb_ran(void);
int dlthrb_ran(void)
{
	return dlthrb_ranp();
}
