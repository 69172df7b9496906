/*
 * unsettled.c — requests a sync worker left unsettled, remembered across its exit.
 *
 * A request whose answer never came (the worker terminated, killed, or the server stopped
 * while it was in flight) may still be applied by the server later, after a newer state
 * of the same rows was sent by the next worker: the stale state would win, and nothing
 * would send the rows again. Within one worker, such requests are outcome-unknown and
 * their keys are sent again later (sync_unknown.c); across a worker's exit, which may
 * run no code at all (SIGKILL, a crash of the server), each worker keeps in a small file
 * of the data directory, per database, the latest time a request of its own that is not
 * settled may still be applied (its start plus chroma_sync.timeout, the same bound the
 * outcome-unknown keys wait for; chroma_http_unsettled_until). The next worker of the
 * database reads it when it starts and sends nothing before that time.
 *
 * The file is written when the value grows (by a second more than needed, so that the
 * requests begun within that second need no write) and when no request is left unsettled
 * (0): two small writes to the page cache per request at most, no fsync (an operating
 * system's crash takes longer than the timeout to come back).
 *
 * The file also names the timeline it was written on. Another server's worker may have
 * left requests unsettled that this data directory never heard of: a primary stopped with
 * a request unanswered whose standby is promoted (the standby's copy of the file is the
 * one its base backup took), or a backup restored to a point in time while the original
 * still runs. Both end on a new timeline, so a worker that finds the timeline changed
 * since the file was written (or no timeline recorded on a timeline after the first)
 * sends nothing for one request timeout (unsettled_check_timeline; red-team TAP 253).
 */
#include "postgres.h"

#include <fcntl.h>
#include <unistd.h>

#include "access/xlog.h"
#include "miscadmin.h"
#include "utils/timestamp.h"

#include "chroma_sync.h"
#include "http.h"
#include "unsettled.h"

#define UNSETTLED_PAD_MS 1000
#define UNSETTLED_OLD_LEN 21	/* 0.5 before timelines: 20 digits and a newline */
#define UNSETTLED_LEN 32		/* 20 digits, a space, 10 digits (the timeline), a newline */

static int	unsettled_fd = -1;
static TimestampTz unsettled_written = 0;
static TimeLineID file_tli = 0; /* the timeline the file names (0: none) */

static void
write_value(TimestampTz value)
{
	char		buf[UNSETTLED_LEN + 1];

	if (unsettled_fd < 0)
		return;
	snprintf(buf, sizeof(buf), "%020lld %010u\n", (long long) Max(value, 0), (unsigned) file_tli);
	/* one write of 32 bytes at offset 0: never seen half-written after a kill */
	if (pwrite(unsettled_fd, buf, UNSETTLED_LEN, 0) != UNSETTLED_LEN)
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("chroma_sync: could not write the worker's unsettled-request file: %m")));
	unsettled_written = value;
}

static void
unsettled_changed(TimestampTz until)
{
	if (until == 0)
	{
		if (unsettled_written != 0)
			write_value(0);
	}
	else if (until > unsettled_written)
		write_value(TimestampTzPlusMilliseconds(until, UNSETTLED_PAD_MS));
}

TimestampTz
unsettled_begin(void)
{
	char		path[MAXPGPATH];
	char		buf[UNSETTLED_LEN + 1];
	TimestampTz previous = 0;
	ssize_t		n;

	/* relative to the data directory, the worker's working directory */
	snprintf(path, sizeof(path), "chroma_sync_unsettled.%u", MyDatabaseId);
	unsettled_fd = open(path, O_RDWR | O_CREAT | PG_BINARY, S_IRUSR | S_IWUSR);
	if (unsettled_fd < 0)
	{
		/* without it the gap is the one before: log it, sync anyway */
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("chroma_sync: could not open \"%s\": %m", path)));
		return 0;
	}
	n = pread(unsettled_fd, buf, UNSETTLED_LEN, 0);
	if (n >= UNSETTLED_OLD_LEN)
	{
		char	   *end;
		long long	v;

		buf[n] = '\0';
		errno = 0;
		v = strtoll(buf, &end, 10);
		if (errno == 0 && (*end == '\n' || *end == ' ') && v > 0)
			previous = (TimestampTz) v;
		if (errno == 0 && *end == ' ' && n == UNSETTLED_LEN)
		{
			char	   *tend;
			unsigned long t = strtoul(end + 1, &tend, 10);

			if (errno == 0 && *tend == '\n' && t <= PG_UINT32_MAX)
				file_tli = (TimeLineID) t;
		}
	}
	if (previous <= GetCurrentTimestamp())
		previous = 0;
	/* never beyond one timeout from now: a clock set back meanwhile (TAP 252) */
	previous = Min(previous, TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													  chroma_timeout_ms + UNSETTLED_PAD_MS));
	/* kept while this worker waits for it (a kill meanwhile leaves it for the next one) */
	write_value(previous);
	chroma_http_unsettled_hook = unsettled_changed;
	return previous;
}

TimestampTz
unsettled_check_timeline(void)
{
	TimeLineID	tli = GetWALInsertionTimeLine();
	TimeLineID	was = file_tli;

	TimestampTz until;

	if (unsettled_fd < 0 || was == tli)
		return 0;
	file_tli = tli;
	if (was == 0 && tli <= 1)
	{
		write_value(unsettled_written);
		return 0;				/* a new data directory, or one never promoted */
	}
	/* kept in the file while this worker waits: a worker ending meanwhile leaves it (TAP 259) */
	until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), chroma_timeout_ms + UNSETTLED_PAD_MS);
	write_value(Max(unsettled_written, until));
	ereport(LOG,
			(errmsg("chroma_sync worker: this server is on timeline %u, the worker's last record is from %s: nothing is sent for %d ms",
					tli, was == 0 ? "no timeline" : psprintf("timeline %u", was), chroma_timeout_ms),
			 errdetail("After a promotion or a point-in-time recovery, requests another server sent may still be applied by Chroma until one request timeout has passed.")));
	return until;
}
