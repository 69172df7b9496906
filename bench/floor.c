/*
 * floor.c — the Chroma server's own ingest limit, measured without chroma_sync.
 *
 *   floor gen N DIM SEED
 *       prints N records (ids 1..N, DIM float32 values each) in COPY text format:
 *       "id<TAB>{v,v,...}"; the values are exact in float32, so the table loaded from
 *       this output holds bit-for-bit the records "post" sends.
 *   floor post URL COLLECTION N DIM BATCH SEED [FIRST_ID]
 *       creates COLLECTION (get_or_create), builds every upsert body first (ids
 *       FIRST_ID.. (default 1) as decimal strings, embeddings base64 float32
 *       little-endian), then POSTs them
 *       back-to-back on one kept-alive libcurl connection; prints
 *       "records N seconds S records_per_s R".
 *   floor post-multi URL COLLECTION N DIM BATCH SEED INFLIGHT [FIRST_ID]
 *       the same bodies, POSTed with libcurl's multi interface keeping INFLIGHT
 *       (1..64) requests in flight at once (each on its own kept-alive connection;
 *       a new one starts as soon as one finishes); prints the same line plus
 *       "mean_request_ms M" (send to answer, averaged over the requests) and "cpu_s C"
 *       (its own CPU time, user and system, while it POSTed).
 *       SEED "sin" (post-multi only) sends instead the values bench/latency.sh's tables
 *       hold: element j (1..DIM) of record i is (float) sin(i * 12.9898 + j * 78.233),
 *       what PostgreSQL's sin(...)::real gives (ids are then "r" || i, as in the table).
 *
 * Its own small HTTP and base64 code on purpose: it must not share chroma_sync's.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>

#include <curl/curl.h>

typedef struct
{
	char	   *data;
	size_t		len;
	size_t		cap;
} buf_t;

static void
buf_reserve(buf_t *b, size_t extra)
{
	if (b->len + extra + 1 <= b->cap)
		return;
	while (b->len + extra + 1 > b->cap)
		b->cap = b->cap ? b->cap * 2 : 4096;
	b->data = realloc(b->data, b->cap);
	if (!b->data)
	{
		perror("realloc");
		exit(1);
	}
}

static void
buf_add(buf_t *b, const char *s, size_t n)
{
	buf_reserve(b, n);
	memcpy(b->data + b->len, s, n);
	b->len += n;
	b->data[b->len] = '\0';
}

static void
buf_str(buf_t *b, const char *s)
{
	buf_add(b, s, strlen(s));
}

static uint64_t rng_state;

static uint64_t
rng_next(void)
{
	uint64_t	x = rng_state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	rng_state = x;
	return x;
}

/* values k/8192 with |k| <= 10000: exact in float32, short in text */
static float
rng_value(void)
{
	return (float) ((int) (rng_next() % 20001) - 10000) / 8192.0f;
}

static const char b64[] =
"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static void
buf_base64(buf_t *b, const unsigned char *p, size_t n)
{
	size_t		i;

	buf_reserve(b, (n + 2) / 3 * 4);
	for (i = 0; i + 2 < n; i += 3)
	{
		uint32_t	v = (uint32_t) p[i] << 16 | (uint32_t) p[i + 1] << 8 | p[i + 2];

		b->data[b->len++] = b64[v >> 18];
		b->data[b->len++] = b64[(v >> 12) & 63];
		b->data[b->len++] = b64[(v >> 6) & 63];
		b->data[b->len++] = b64[v & 63];
	}
	if (i < n)
	{
		uint32_t	v = (uint32_t) p[i] << 16 | (i + 1 < n ? (uint32_t) p[i + 1] << 8 : 0);

		b->data[b->len++] = b64[v >> 18];
		b->data[b->len++] = b64[(v >> 12) & 63];
		b->data[b->len++] = i + 1 < n ? b64[(v >> 6) & 63] : '=';
		b->data[b->len++] = '=';
	}
	b->data[b->len] = '\0';
}

static size_t
on_body(char *ptr, size_t size, size_t nmemb, void *arg)
{
	buf_add((buf_t *) arg, ptr, size * nmemb);
	return size * nmemb;
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static CURL *curl;
static buf_t reply;

static long
post(const char *url, const char *body, size_t len)
{
	long		code = 0;
	CURLcode	rc;

	reply.len = 0;
	buf_reserve(&reply, 0);
	reply.data[0] = '\0';
	curl_easy_setopt(curl, CURLOPT_URL, url);
	curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) len);
	rc = curl_easy_perform(curl);
	if (rc != CURLE_OK)
	{
		fprintf(stderr, "floor: %s: %s\n", url, curl_easy_strerror(rc));
		exit(1);
	}
	curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
	return code;
}

static int
cmd_gen(long n, int dim)
{
	float		v;
	long		i;
	int			j;

	for (i = 1; i <= n; i++)
	{
		printf("%ld\t{", i);
		for (j = 0; j < dim; j++)
		{
			v = rng_value();
			printf(j ? ",%.9g" : "%.9g", (double) v);
		}
		fputs("}\n", stdout);
	}
	return fflush(stdout) == 0 ? 0 : 1;
}

static int
cmd_post(const char *base, const char *name, long n, int dim, int batch, long first_id)
{
	const char *c = "/api/v2/tenants/default_tenant/databases/default_database/collections";
	char		url[2048];
	char		id[64];
	buf_t		req = {0};
	buf_t	   *bodies;
	float	   *vec = malloc(sizeof(float) * dim);
	long		nb = (n + batch - 1) / batch;
	long		b,
				i;
	int			j;
	long		code;
	const char *p;
	double		t0,
				t;
	struct curl_slist *hdr = NULL;

	curl_global_init(CURL_GLOBAL_DEFAULT);
	curl = curl_easy_init();
	hdr = curl_slist_append(hdr, "Content-Type: application/json");
	hdr = curl_slist_append(hdr, "Expect:");
	curl_easy_setopt(curl, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, &reply);
	curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(curl, CURLOPT_TCP_NODELAY, 1L);

	/* the collection */
	snprintf(url, sizeof(url), "%s%s", base, c);
	buf_str(&req, "{\"name\":\"");
	buf_str(&req, name);
	buf_str(&req, "\",\"get_or_create\":true}");
	code = post(url, req.data, req.len);
	p = strstr(reply.data, "\"id\":\"");
	if (code != 200 || !p || strlen(p + 6) < 36)
	{
		fprintf(stderr, "floor: create collection: HTTP %ld: %s\n", code, reply.data);
		return 1;
	}
	snprintf(url, sizeof(url), "%s%s/%.36s/upsert", base, c, p + 6);

	/* every body, before timing */
	bodies = calloc(nb, sizeof(buf_t));
	for (b = 0; b < nb; b++)
	{
		long		from = first_id + b * batch,
					last = first_id + n - 1,
					to = from + batch - 1 < last ? from + batch - 1 : last;

		buf_str(&bodies[b], "{\"ids\":[");
		for (i = from; i <= to; i++)
		{
			snprintf(id, sizeof(id), i > from ? ",\"%ld\"" : "\"%ld\"", i);
			buf_str(&bodies[b], id);
		}
		buf_str(&bodies[b], "],\"embeddings\":[");
		for (i = from; i <= to; i++)
		{
			for (j = 0; j < dim; j++)
				vec[j] = rng_value();
			buf_str(&bodies[b], i > from ? ",\"" : "\"");
			buf_base64(&bodies[b], (const unsigned char *) vec, sizeof(float) * dim);
			buf_str(&bodies[b], "\"");
		}
		buf_str(&bodies[b], "]}");
	}

	t0 = now_s();
	for (b = 0; b < nb; b++)
	{
		code = post(url, bodies[b].data, bodies[b].len);
		if (code != 200)
		{
			fprintf(stderr, "floor: upsert: HTTP %ld: %s\n", code, reply.data);
			return 1;
		}
	}
	t = now_s() - t0;
	printf("records %ld seconds %.3f records_per_s %.1f\n", n, t, n / t);
	curl_easy_cleanup(curl);
	curl_slist_free_all(hdr);
	return 0;
}

typedef struct
{
	CURL	   *h;
	buf_t		reply;
	long		batch;			/* index of the body in flight, -1 when idle */
	double		started;
} slot_t;

static void
slot_start(CURLM *multi, slot_t *s, const char *url, buf_t *body, long b, struct curl_slist *hdr)
{
	s->reply.len = 0;
	buf_reserve(&s->reply, 0);
	s->reply.data[0] = '\0';
	if (!s->h)
	{
		s->h = curl_easy_init();
		curl_easy_setopt(s->h, CURLOPT_HTTPHEADER, hdr);
		curl_easy_setopt(s->h, CURLOPT_WRITEFUNCTION, on_body);
		curl_easy_setopt(s->h, CURLOPT_WRITEDATA, &s->reply);
		curl_easy_setopt(s->h, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(s->h, CURLOPT_TCP_NODELAY, 1L);
		curl_easy_setopt(s->h, CURLOPT_URL, url);
		curl_easy_setopt(s->h, CURLOPT_PRIVATE, s);
	}
	curl_easy_setopt(s->h, CURLOPT_POSTFIELDS, body->data);
	curl_easy_setopt(s->h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) body->len);
	s->batch = b;
	s->started = now_s();
	curl_multi_add_handle(multi, s->h);
}

static int	sin_values;		/* SEED "sin": latency.sh's values, not random ones */

static int
cmd_post_multi(const char *base, const char *name, long n, int dim, int batch, int inflight,
			   long first_id)
{
	const char *c = "/api/v2/tenants/default_tenant/databases/default_database/collections";
	char		url[2048];
	char		id[64];
	buf_t		req = {0};
	buf_t	   *bodies;
	float	   *vec = malloc(sizeof(float) * dim);
	long		nb = (n + batch - 1) / batch;
	long		b,
				i,
				next = 0,
				done = 0;
	int			j,
				running,
				active = 0;
	long		code;
	const char *p;
	double		t0,
				t,
				req_total = 0;
	struct curl_slist *hdr = NULL;
	CURLM	   *multi;
	struct rusage ru0,
				ru1;
	slot_t	   *slots = calloc(inflight, sizeof(slot_t));

	curl_global_init(CURL_GLOBAL_DEFAULT);
	curl = curl_easy_init();
	hdr = curl_slist_append(hdr, "Content-Type: application/json");
	hdr = curl_slist_append(hdr, "Expect:");
	curl_easy_setopt(curl, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, &reply);
	curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(curl, CURLOPT_TCP_NODELAY, 1L);

	snprintf(url, sizeof(url), "%s%s", base, c);
	buf_str(&req, "{\"name\":\"");
	buf_str(&req, name);
	buf_str(&req, "\",\"get_or_create\":true}");
	code = post(url, req.data, req.len);
	p = strstr(reply.data, "\"id\":\"");
	if (code != 200 || !p || strlen(p + 6) < 36)
	{
		fprintf(stderr, "floor: create collection: HTTP %ld: %s\n", code, reply.data);
		return 1;
	}
	snprintf(url, sizeof(url), "%s%s/%.36s/upsert", base, c, p + 6);

	bodies = calloc(nb, sizeof(buf_t));
	for (b = 0; b < nb; b++)
	{
		long		from = first_id + b * batch,
					last = first_id + n - 1,
					to = from + batch - 1 < last ? from + batch - 1 : last;

		buf_str(&bodies[b], "{\"ids\":[");
		for (i = from; i <= to; i++)
		{
			snprintf(id, sizeof(id), "%s\"%s%ld\"", i > from ? "," : "", sin_values ? "r" : "", i);
			buf_str(&bodies[b], id);
		}
		buf_str(&bodies[b], "],\"embeddings\":[");
		for (i = from; i <= to; i++)
		{
			for (j = 0; j < dim; j++)
				vec[j] = sin_values ? (float) sin(i * 12.9898 + (j + 1) * 78.233) : rng_value();
			buf_str(&bodies[b], i > from ? ",\"" : "\"");
			buf_base64(&bodies[b], (const unsigned char *) vec, sizeof(float) * dim);
			buf_str(&bodies[b], "\"");
		}
		buf_str(&bodies[b], "]}");
	}

	multi = curl_multi_init();
	curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, (long) inflight + 1);
	for (j = 0; j < inflight; j++)
		slots[j].batch = -1;

	getrusage(RUSAGE_SELF, &ru0);
	t0 = now_s();
	while (done < nb)
	{
		CURLMsg    *m;
		int			left;

		for (j = 0; j < inflight && next < nb; j++)
			if (slots[j].batch < 0)
			{
				slot_start(multi, &slots[j], url, &bodies[next], next, hdr);
				next++;
				active++;
			}
		curl_multi_perform(multi, &running);
		while ((m = curl_multi_info_read(multi, &left)) != NULL)
		{
			slot_t	   *s;

			if (m->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **) &s);
			if (m->data.result != CURLE_OK)
			{
				fprintf(stderr, "floor: upsert: %s\n", curl_easy_strerror(m->data.result));
				return 1;
			}
			curl_easy_getinfo(m->easy_handle, CURLINFO_RESPONSE_CODE, &code);
			if (code != 200)
			{
				fprintf(stderr, "floor: upsert: HTTP %ld: %s\n", code, s->reply.data);
				return 1;
			}
			req_total += now_s() - s->started;
			curl_multi_remove_handle(multi, m->easy_handle);
			s->batch = -1;
			active--;
			done++;
		}
		if (done < nb && (next >= nb || active == inflight))
			curl_multi_poll(multi, NULL, 0, 100, NULL);
	}
	t = now_s() - t0;
	getrusage(RUSAGE_SELF, &ru1);
	printf("records %ld seconds %.3f records_per_s %.1f mean_request_ms %.1f cpu_s %.3f\n", n, t, n / t,
		   req_total / nb * 1000,
		   (ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec) + (ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) +
		   ((ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec) + (ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec)) / 1e6);
	for (j = 0; j < inflight; j++)
		if (slots[j].h)
			curl_easy_cleanup(slots[j].h);
	curl_multi_cleanup(multi);
	curl_easy_cleanup(curl);
	curl_slist_free_all(hdr);
	return 0;
}

int
main(int argc, char **argv)
{
	if (argc == 5 && strcmp(argv[1], "gen") == 0)
	{
		rng_state = strtoull(argv[4], NULL, 10) * 2654435761u + 88172645463325252ull;
		return cmd_gen(atol(argv[2]), atoi(argv[3]));
	}
	if ((argc == 8 || argc == 9) && strcmp(argv[1], "post") == 0)
	{
		rng_state = strtoull(argv[7], NULL, 10) * 2654435761u + 88172645463325252ull;
		return cmd_post(argv[2], argv[3], atol(argv[4]), atoi(argv[5]), atoi(argv[6]),
						argc == 9 ? atol(argv[8]) : 1);
	}
	if ((argc == 9 || argc == 10) && strcmp(argv[1], "post-multi") == 0)
	{
		int			inflight = atoi(argv[8]);

		if (inflight < 1 || inflight > 64)
		{
			fprintf(stderr, "floor: INFLIGHT is 1..64\n");
			return 2;
		}
		sin_values = strcmp(argv[7], "sin") == 0;
		rng_state = strtoull(argv[7], NULL, 10) * 2654435761u + 88172645463325252ull;
		return cmd_post_multi(argv[2], argv[3], atol(argv[4]), atoi(argv[5]), atoi(argv[6]),
							  inflight, argc == 10 ? atol(argv[9]) : 1);
	}
	fprintf(stderr, "usage: floor gen N DIM SEED | floor post URL COLLECTION N DIM BATCH SEED [FIRST_ID]\n"
			"       | floor post-multi URL COLLECTION N DIM BATCH SEED INFLIGHT [FIRST_ID]\n");
	return 2;
}
