/*
 * Preloaded after the ASan runtime into the PostgreSQL servers of a sanitizer run
 * (test/run_all.sh --sanitize); not part of the extension.
 *
 * Why: the server binary is not instrumented, so ASan starts on its first intercepted call.
 * In Debian's postgres that is the malloc inside libgpg-error's constructor, which runs
 * bindtextdomain() holding glibc's gettext lock for writing. ASan's start-up looks up
 * swift_demangle with dlsym; the lookup fails and its dlerror() translates the message,
 * taking the same lock for reading in the same thread. glibc refuses (EDEADLK) but the
 * unlock that follows releases the writer, the writer's own unlock then drops the reader
 * count below zero, and the next bindtextdomain() (postgres' main) waits forever: that
 * is why "LD_PRELOAD=libasan pg_ctl start" hung. Defining the symbol makes the lookup
 * succeed, so no error message is translated. Returning NULL means "not a Swift name":
 * ASan goes on to demangle C++ names itself.
 */
#include <stddef.h>
#include <stdint.h>

char	   *swift_demangle(const char *mangled, size_t length, char *buffer,
						   size_t *buffer_size, uint32_t flags);

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
