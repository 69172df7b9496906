/*
 * encode_bench.c — micro-benchmark of the column-body encoder.
 *
 * Prints one "name value_ms" line per measurement (the median of many runs):
 *   base64_rows_scalar     1000 embeddings x 1536 float32, one encode call per row, scalar
 *   base64_rows_avx2       the same with the AVX2 encoder (when the CPU has it)
 *   base64_rows            the same through the run-time dispatch (the fastest encoder)
 *   base64_whole_scalar    the same 6,144,000 bytes in a single call, scalar
 *   base64_whole           the same through the dispatch
 *   memcpy_whole           memcpy of the same 6,144,000 bytes (what no encoder can beat by
 *                          much: base64 reads them and writes a third more)
 *   base64_column          cs_encode_records: 1000 ids + the base64 embeddings column
 *   body_json              cs_encode_records: 20,000 records, 4 dims, 2-key metadata (text
 *                          given), JSON floats
 *   body_base64            the same records with base64 embeddings (what the worker sends
 *                          to servers that take them)
 *   body_json_meta_built   the same JSON body, with each metadata object also rendered inside the
 *                          timed loop
 * The data come from the xorshift32 generator that encode_node.js uses too. Times are
 * the process's CPU time (steadier on a shared machine); BENCH_CLOCK=wall measures
 * wall-clock time instead.
 */
#include "encode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ROWS 1000
#define DIM 1536
#define BODY_RECORDS 20000
#define BODY_DIM 4

static uint32_t rng_state = 2463534242u;

/* xorshift32; value = a 24-bit fraction in [-1, 1), exact in float32 and in doubles */
static float
next_value(void)
{
	uint32_t	x = rng_state;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	rng_state = x;
	return (float) ((double) (x >> 8) / 16777216.0 * 2.0 - 1.0);
}

static clockid_t bench_clock = CLOCK_PROCESS_CPUTIME_ID;

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(bench_clock, &ts);
	return (double) ts.tv_sec * 1e3 + (double) ts.tv_nsec / 1e6;
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a;
	double		y = *(const double *) b;

	return x < y ? -1 : x > y;
}

static double
median(double *v, int n)
{
	qsort(v, (size_t) n, sizeof(double), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Writes i's digits right-aligned at the end of a 24-byte buffer (what a caller's own
 * integer formatting would cost, not snprintf's); returns the digit count. */
static int
format_index(size_t i, char *buf)
{
	char	   *p = buf + 24;

	do
	{
		*--p = (char) ('0' + i % 10);
		i /= 10;
	} while (i > 0);
	return (int) (buf + 24 - p);
}

/* keeps results observable so no call is optimised away */
static volatile size_t sink;

typedef enum bench_kind
{
	B64_ROWS_SCALAR, B64_ROWS_AVX2, B64_ROWS, B64_WHOLE_SCALAR, B64_WHOLE, MEMCPY_WHOLE, B64_COLUMN,
	BODY_JSON,
	BODY_BASE64, BODY_JSON_META_BUILT
} bench_kind;

typedef struct bench_data
{
	float	   *embeddings;		/* ROWS x DIM */
	char	   *b64_out;
	cs_record  *rows;			/* ROWS records over embeddings */
	float	   *body_embeddings;	/* BODY_RECORDS x BODY_DIM */
	cs_record  *body;
	char	  (*ids)[16];
	char	  (*categories)[16];
	char	  (*meta)[64];
	cs_buf		out;
	cs_buf		meta_buf;
} bench_data;

static void
run_once(bench_data *d, bench_kind kind)
{
	size_t		i;
	size_t		row_bytes = DIM * sizeof(float);
	size_t		row_chars = cs_base64_len(row_bytes);
	cs_body_options opt;

	switch (kind)
	{
		case B64_ROWS_SCALAR:
			for (i = 0; i < ROWS; i++)
				sink += cs_base64_encode_scalar((const unsigned char *) (d->embeddings + i * DIM),
												row_bytes, d->b64_out + i * row_chars);
			break;
		case B64_ROWS_AVX2:
			{
				cs_base64_fn avx2 = cs_base64_encoder("avx2");

				for (i = 0; i < ROWS; i++)
					sink += avx2((const unsigned char *) (d->embeddings + i * DIM),
								 row_bytes, d->b64_out + i * row_chars);
				break;
			}
		case B64_ROWS:
			for (i = 0; i < ROWS; i++)
				sink += cs_base64_encode((const unsigned char *) (d->embeddings + i * DIM),
										 row_bytes, d->b64_out + i * row_chars);
			break;
		case B64_WHOLE_SCALAR:
			sink += cs_base64_encode_scalar((const unsigned char *) d->embeddings,
											ROWS * row_bytes, d->b64_out);
			break;
		case B64_WHOLE:
			sink += cs_base64_encode((const unsigned char *) d->embeddings,
									 ROWS * row_bytes, d->b64_out);
			break;
		case MEMCPY_WHOLE:
			memcpy(d->b64_out, d->embeddings, ROWS * row_bytes);
			sink += (unsigned char) d->b64_out[ROWS * row_bytes - 1];
			break;
		case B64_COLUMN:
			opt = (cs_body_options)
			{
				DIM, CS_ENCODING_BASE64, true, false, false
			};
			d->out.len = 0;
			cs_encode_records(&d->out, d->rows, ROWS, &opt);
			sink += d->out.len;
			break;
		case BODY_JSON:
			opt = (cs_body_options)
			{
				BODY_DIM, CS_ENCODING_JSON, true, false, true
			};
			d->out.len = 0;
			cs_encode_records(&d->out, d->body, BODY_RECORDS, &opt);
			sink += d->out.len;
			break;
		case BODY_BASE64:
			opt = (cs_body_options)
			{
				BODY_DIM, CS_ENCODING_BASE64, true, false, true
			};
			d->out.len = 0;
			cs_encode_records(&d->out, d->body, BODY_RECORDS, &opt);
			sink += d->out.len;
			break;
		case BODY_JSON_META_BUILT:
			/* render {"category":"...","rank":N} per record, as a caller would */
			d->meta_buf.len = 0;
			cs_buf_reserve(&d->meta_buf, (size_t) BODY_RECORDS * 48);
			for (i = 0; i < BODY_RECORDS; i++)
			{
				size_t		start = d->meta_buf.len;
				char		num[24];
				int			nn = format_index(i, num);

				cs_buf_append(&d->meta_buf, "{\"category\":", 12);
				cs_json_string(&d->meta_buf, d->categories[i], strlen(d->categories[i]));
				cs_buf_append(&d->meta_buf, ",\"rank\":", 8);
				cs_buf_append(&d->meta_buf, num + sizeof(num) - nn, (size_t) nn);
				cs_buf_putc(&d->meta_buf, '}');
				d->body[i].metadata_len = d->meta_buf.len - start;
				/* offsets first; the buffer is not moved because it was reserved */
				d->body[i].metadata = d->meta_buf.data + start;
			}
			opt = (cs_body_options)
			{
				BODY_DIM, CS_ENCODING_JSON, true, false, true
			};
			d->out.len = 0;
			cs_encode_records(&d->out, d->body, BODY_RECORDS, &opt);
			sink += d->out.len;
			break;
	}
}

static void
report(bench_data *d, const char *name, bench_kind kind, int runs)
{
	double	   *t = malloc(sizeof(double) * (size_t) runs);
	int			i;

	run_once(d, kind);			/* warm caches and page in the output */
	for (i = 0; i < runs; i++)
	{
		double		start = now_ms();

		run_once(d, kind);
		t[i] = now_ms() - start;
	}
	printf("%s %.4f\n", name, median(t, runs));
	fflush(stdout);
	free(t);
}

int
main(int argc, char **argv)
{
	bench_data	d;
	size_t		i;
	int			runs = argc > 1 ? atoi(argv[1]) : 101;

	if (runs < 1)
		runs = 1;
	if (getenv("BENCH_CLOCK") != NULL && strcmp(getenv("BENCH_CLOCK"), "wall") == 0)
		bench_clock = CLOCK_MONOTONIC;
	d.embeddings = malloc(sizeof(float) * ROWS * DIM);
	d.b64_out = malloc(cs_base64_len(ROWS * DIM * sizeof(float)) + 64);
	d.rows = calloc(ROWS, sizeof(cs_record));
	d.body_embeddings = malloc(sizeof(float) * BODY_RECORDS * BODY_DIM);
	d.body = calloc(BODY_RECORDS, sizeof(cs_record));
	d.ids = malloc(sizeof(*d.ids) * BODY_RECORDS);
	d.categories = malloc(sizeof(*d.categories) * BODY_RECORDS);
	d.meta = malloc(sizeof(*d.meta) * BODY_RECORDS);
	if (!d.embeddings || !d.b64_out || !d.rows || !d.body_embeddings || !d.body ||
		!d.ids || !d.categories || !d.meta)
		abort();

	for (i = 0; i < (size_t) ROWS * DIM; i++)
		d.embeddings[i] = next_value();
	for (i = 0; i < BODY_RECORDS * BODY_DIM; i++)
		d.body_embeddings[i] = next_value();
	for (i = 0; i < BODY_RECORDS; i++)
	{
		snprintf(d.ids[i], sizeof(d.ids[i]), "id-%zu", i);
		snprintf(d.categories[i], sizeof(d.categories[i]), "cat-%zu", i % 10);
		snprintf(d.meta[i], sizeof(d.meta[i]), "{\"category\":\"%s\",\"rank\":%zu}",
				 d.categories[i], i);
		d.body[i] = (cs_record)
		{
			d.ids[i], strlen(d.ids[i]), d.body_embeddings + i * BODY_DIM, NULL, 0,
				d.meta[i], strlen(d.meta[i])
		};
		if (i < ROWS)
			d.rows[i] = (cs_record)
		{
			d.ids[i], strlen(d.ids[i]), d.embeddings + i * DIM, NULL, 0, NULL, 0
		};
	}
	cs_buf_init_malloc(&d.out, 16 * 1024 * 1024);
	cs_buf_init_malloc(&d.meta_buf, (size_t) BODY_RECORDS * 48 + 1);

	printf("# base64 implementation: %s\n", cs_base64_impl());
	report(&d, "base64_rows_scalar", B64_ROWS_SCALAR, runs);
	if (cs_base64_encoder("avx2") != NULL)
		report(&d, "base64_rows_avx2", B64_ROWS_AVX2, runs);
	report(&d, "base64_rows", B64_ROWS, runs);
	report(&d, "base64_whole_scalar", B64_WHOLE_SCALAR, runs);
	report(&d, "base64_whole", B64_WHOLE, runs);
	report(&d, "memcpy_whole", MEMCPY_WHOLE, runs);
	report(&d, "base64_column", B64_COLUMN, runs);
	report(&d, "body_json", BODY_JSON, runs);
	printf("# body_json size %zu bytes\n", d.out.len);
	report(&d, "body_base64", BODY_BASE64, runs);
	printf("# body_base64 size %zu bytes\n", d.out.len);
	/* the metadata pointers are rewritten by this one: run it last */
	report(&d, "body_json_meta_built", BODY_JSON_META_BUILT, runs);

	cs_buf_free_malloc(&d.out);
	cs_buf_free_malloc(&d.meta_buf);
	free(d.embeddings);
	free(d.b64_out);
	free(d.rows);
	free(d.body_embeddings);
	free(d.body);
	free(d.ids);
	free(d.categories);
	free(d.meta);
	return 0;
}
