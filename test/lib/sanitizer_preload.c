/*
 * Preloaded after the ASan runtime into the PostgreSQL servers of a sanitizer run
 * (test/run_all.sh --sanitize, built by test/lib/sanitize.sh); not part of the extension.
 *
 * swift_demangle: the server binary is not instrumented, so ASan starts on its first
 * intercepted call. In Debian's postgres that is the malloc inside libgpg-error's
 * constructor, which runs bindtextdomain() holding glibc's gettext lock for writing.
 * ASan's start-up looks up swift_demangle with dlsym; the lookup fails and its dlerror()
 * translates the message, taking the same lock for reading in the same thread. glibc
 * refuses (EDEADLK), but the unlock that follows releases the writer, the writer's own
 * unlock then drops the reader count below zero, and the next bindtextdomain() (in
 * postgres' main) waits forever: that is why "LD_PRELOAD=libasan pg_ctl start" hung.
 * Defining the symbol makes the lookup succeed, so no message is translated. Returning
 * NULL means "not a Swift name": ASan goes on to demangle C++ names itself.
 *
 * __ubsan_default_options: gcc's UBSan runtime (libubsan, loaded with chroma_sync.so)
 * starts on its first report, in a backend whose environment PostgreSQL has overwritten
 * with the process title, so UBSAN_OPTIONS is gone by then; the options come from here
 * instead (SAN_UBSAN_OPTIONS, set by the harness). Its start-up also sets the report path
 * of the ASan runtime: without these options, to stderr.
 */
#include <stddef.h>
#include <stdint.h>

#ifndef SAN_UBSAN_OPTIONS
#error "build with -DSAN_UBSAN_OPTIONS='\"...\"'"
#endif

char	   *swift_demangle(const char *mangled, size_t length, char *buffer,
						   size_t *buffer_size, uint32_t flags);
const char *__ubsan_default_options(void);

char *
swift_demangle(const char *mangled, size_t length, char *buffer,
			   size_t *buffer_size, uint32_t flags)
{
	(void) mangled;
	(void) length;
	(void) buffer;
	(void) buffer_size;
	(void) flags;
	return NULL;
}

const char *
__ubsan_default_options(void)
{
	return SAN_UBSAN_OPTIONS;
}
