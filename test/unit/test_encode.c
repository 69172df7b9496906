/*
 * test_encode.c — unit tests of the column-body encoder (src/encode.c).
 *
 * Each TEST is one case; a case fails when any of its checks fails. The last line of
 * output is "unit: N passed, M failed".
 */
#include "encode.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int	cases_passed;
static int	cases_failed;
static int	case_errors;

#define CHECK(cond, ...) \
	do { \
		if (!(cond)) \
		{ \
			if (case_errors < 10) \
			{ \
				printf("  FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
				printf(__VA_ARGS__); \
				printf("\n"); \
			} \
			case_errors++; \
		} \
	} while (0)

static void
run_case(const char *name, void (*fn) (void))
{
	case_errors = 0;
	fn();
	if (case_errors == 0)
	{
		cases_passed++;
		printf("ok   %s\n", name);
	}
	else
	{
		cases_failed++;
		printf("FAIL %s (%d failed checks)\n", name, case_errors);
	}
	fflush(stdout);
}

#define TEST(fn) run_case(#fn, fn)

/* xorshift64*: deterministic test data */
static uint64_t rng_state = UINT64_C(0x9E3779B97F4A7C15);

static uint64_t
rng_next(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * UINT64_C(0x2545F4914F6CDD1D);
}

static float
float_from_bits(uint32_t bits)
{
	float		f;

	memcpy(&f, &bits, sizeof(f));
	return f;
}

static uint32_t
bits_of(float f)
{
	uint32_t	bits;

	memcpy(&bits, &f, sizeof(bits));
	return bits;
}

/* ------------------------------------------------------------------ base64 */

static void
test_base64_rfc4648(void)
{
	static const char *const in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
	static const char *const out[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
	size_t		i;

	for (i = 0; i < sizeof(in) / sizeof(in[0]); i++)
	{
		char		buf[16];
		size_t		n;

		memset(buf, '#', sizeof(buf));
		n = cs_base64_encode_scalar((const unsigned char *) in[i], strlen(in[i]), buf);
		CHECK(n == strlen(out[i]) && memcmp(buf, out[i], n) == 0 && buf[n] == '#',
			  "scalar \"%s\" -> \"%.*s\"", in[i], (int) n, buf);
		CHECK(n == cs_base64_len(strlen(in[i])), "length of \"%s\"", in[i]);

		memset(buf, '#', sizeof(buf));
		n = cs_base64_encode((const unsigned char *) in[i], strlen(in[i]), buf);
		CHECK(n == strlen(out[i]) && memcmp(buf, out[i], n) == 0 && buf[n] == '#',
			  "dispatched \"%s\" -> \"%.*s\"", in[i], (int) n, buf);
	}
}

static void
test_base64_known_floats(void)
{
	static const struct
	{
		float		f;
		const char *b64;
	}			cases[] = {
		{-0.0f, "\"AAAAgA==\""},
		{1.0f, "\"AACAPw==\""},
		{1e-45f, "\"AQAAAA==\""},
		{FLT_MAX, "\"//9/fw==\""},
		{FLT_MIN, "\"AACAAA==\""},
	};
	static const float three[] = {0.1f, 1.0f, -0.0f};
	cs_buf		b;
	size_t		i;

	cs_buf_init_malloc(&b, 0);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
	{
		b.len = 0;
		cs_embedding_base64(&b, &cases[i].f, 1);
		CHECK(b.len == strlen(cases[i].b64) && strcmp(b.data, cases[i].b64) == 0,
			  "float %g -> %s, want %s", (double) cases[i].f, b.data, cases[i].b64);
	}
	b.len = 0;
	cs_embedding_base64(&b, three, 3);
	CHECK(strcmp(b.data, "\"zczMPQAAgD8AAACA\"") == 0, "three floats -> %s", b.data);
	b.len = 0;
	cs_embedding_base64(&b, three, 0);
	CHECK(strcmp(b.data, "\"\"") == 0, "no floats -> %s", b.data);
	cs_buf_free_malloc(&b);
}

/*
 * Every length 0..4096 at every start offset 0..31: each vector encoder this CPU runs,
 * and the dispatched one, write exactly what the scalar one does, and nothing past it.
 */
static void
test_base64_vectors_match_scalar(void)
{
	enum
	{
		MAXLEN = 4096, MAXOFF = 32, GUARD = 64
	};
	static const char *const impls[] = {"avx2", "avx512vbmi", "dispatch"};
	unsigned char *src = malloc(MAXLEN + MAXOFF);
	char	   *want = malloc(cs_base64_len(MAXLEN) + GUARD);
	char	   *got = malloc(cs_base64_len(MAXLEN) + GUARD);
	size_t		len;
	size_t		i;
	size_t		k;

	printf("     dispatched base64 implementation: %s\n", cs_base64_impl());
	for (k = 0; k < sizeof(impls) / sizeof(impls[0]); k++)
	{
		cs_base64_fn fn = k == 2 ? cs_base64_encode : cs_base64_encoder(impls[k]);

		if (fn == NULL)
		{
			printf("     %s: not supported on this CPU, skipped\n", impls[k]);
			continue;
		}
		printf("     checking %s\n", impls[k]);
		for (len = 0; len <= MAXLEN; len++)
		{
			size_t		off;

			/* fresh bytes now and then, so every length sees varied data */
			if (len % 97 == 0)
				for (i = 0; i < MAXLEN + MAXOFF; i++)
					src[i] = (unsigned char) rng_next();
			for (off = 0; off < MAXOFF; off++)
			{
				size_t		outlen = cs_base64_len(len);
				size_t		n1;
				size_t		n2;

				memset(got, '#', outlen + GUARD);
				n1 = cs_base64_encode_scalar(src + off, len, want);
				n2 = fn(src + off, len, got + (off & 7));
				CHECK(n1 == outlen && n2 == outlen, "%s length %zu: %zu %zu", impls[k], len, n1, n2);
				CHECK(memcmp(want, got + (off & 7), outlen) == 0,
					  "%s length %zu offset %zu differs", impls[k], len, off);
				CHECK(got[(off & 7) + outlen] == '#', "%s length %zu offset %zu overruns",
					  impls[k], len, off);
			}
		}
	}
	CHECK(cs_base64_encoder("scalar") == cs_base64_encode_scalar, "scalar by name");
	CHECK(cs_base64_encoder("no-such") == NULL, "unknown name");
	/* all 256 byte values in each position of a group */
	for (i = 0; i < 256 * 3; i++)
	{
		unsigned char grp[3] = {0, 0, 0};
		char		out[4];
		unsigned	j;
		uint32_t	v;

		grp[i / 256] = (unsigned char) i;
		cs_base64_encode_scalar(grp, 3, out);
		v = (uint32_t) grp[0] << 16 | (uint32_t) grp[1] << 8 | grp[2];
		for (j = 0; j < 4; j++)
		{
			unsigned	idx = (v >> (18 - 6 * j)) & 63;
			char		c = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"[idx];

			CHECK(out[j] == c, "byte %zu char %u", i, j);
		}
	}
	free(src);
	free(want);
	free(got);
}

/* Runs a fresh copy of this program with CHROMA_SYNC_BASE64=force; true if it agrees. */
static bool
forced_run_reports(const char *force, const char *expect)
{
	pid_t		pid;
	int			status;

	fflush(stdout);
	pid = fork();
	if (pid == 0)
	{
		setenv("CHROMA_SYNC_BASE64", force, 1);
		execl("/proc/self/exe", "test_encode", "--expect-impl", expect, (char *) NULL);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return false;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* CHROMA_SYNC_BASE64 caps the dispatch; the choice is made once per process. */
static void
test_base64_env_caps_dispatch(void)
{
	const char *impl = cs_base64_impl();

	CHECK(strcmp(impl, "avx512vbmi") == 0 || strcmp(impl, "avx2") == 0 ||
		  strcmp(impl, "scalar") == 0, "impl name %s", impl);
	CHECK(cs_base64_encoder(impl) != NULL, "the dispatched encoder is reachable by name");
	CHECK(forced_run_reports("scalar", "scalar"), "CHROMA_SYNC_BASE64=scalar");
	CHECK(forced_run_reports("avx2", cs_base64_encoder("avx2") ? "avx2" : "scalar"),
		  "CHROMA_SYNC_BASE64=avx2");
	CHECK(forced_run_reports("bogus", impl), "CHROMA_SYNC_BASE64=bogus is ignored");
}

/* The child side of forced_run_reports. */
static int
expect_impl(const char *expect)
{
	unsigned char src[100];
	char		a[136];
	char		b[136];
	int			i;

	for (i = 0; i < 100; i++)
		src[i] = (unsigned char) (i * 7);
	cs_base64_encode(src, 100, a);
	cs_base64_encode_scalar(src, 100, b);
	return strcmp(cs_base64_impl(), expect) == 0 && memcmp(a, b, sizeof(a)) == 0 ? 0 : 1;
}

/* ------------------------------------------------------------------ floats */

/* A JSON number with a '.' or an 'e': -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static int
is_json_float_text(const char *s)
{
	int			frac_or_exp = 0;

	if (*s == '-')
		s++;
	if (*s == '0')
		s++;
	else if (*s >= '1' && *s <= '9')
		while (*s >= '0' && *s <= '9')
			s++;
	else
		return 0;
	if (*s == '.')
	{
		s++;
		if (!(*s >= '0' && *s <= '9'))
			return 0;
		while (*s >= '0' && *s <= '9')
			s++;
		frac_or_exp = 1;
	}
	if (*s == 'e' || *s == 'E')
	{
		s++;
		if (*s == '+' || *s == '-')
			s++;
		if (!(*s >= '0' && *s <= '9'))
			return 0;
		while (*s >= '0' && *s <= '9')
			s++;
		frac_or_exp = 1;
	}
	return *s == '\0' && frac_or_exp;
}

/* Significant digits in a decimal text (leading and trailing zeros dropped). */
static int
significant_digits(const char *s)
{
	char		d[64];
	int			n = 0;
	int			started = 0;

	for (; *s && *s != 'e' && *s != 'E'; s++)
	{
		if (*s < '0' || *s > '9')
			continue;
		if (*s != '0' || started)
		{
			d[n++] = *s;
			started = 1;
		}
	}
	while (n > 1 && d[n - 1] == '0')
		n--;
	return n == 0 ? 1 : n;
}

/*
 * Fewest significant digits with which some decimal reads back bit-identically: the
 * reference. For each precision p it tries the correctly rounded p-digit decimal
 * ("%.{p-1}e") and its two neighbours one unit in the last place away: next to a
 * power of two the interval below is half as wide, so the nearest p-digit decimal
 * can miss it while the one above is inside.
 */
static int
probe_shortest(float f)
{
	int			p;
	char		buf[64];

	for (p = 1; p < 9; p++)
	{
		char	   *e;
		long long	mant = 0;
		int			exp10;
		int			delta;
		const char *c;

		snprintf(buf, sizeof(buf), "%.*e", p - 1, fabs((double) f));
		e = strchr(buf, 'e');
		for (c = buf; c < e; c++)
			if (*c >= '0' && *c <= '9')
				mant = mant * 10 + (*c - '0');
		exp10 = atoi(e + 1) - (p - 1);
		for (delta = -1; delta <= 1; delta++)
		{
			char		cand[64];
			float		back;

			snprintf(cand, sizeof(cand), "%s%llde%d", f < 0 ? "-" : "", mant + delta, exp10);
			back = strtof(cand, NULL);
			if (bits_of(back) == bits_of(f))
				return p;
		}
	}
	return 9;
}

/* Formats f and checks: fits, valid JSON float text, exact round trip, shortest. */
static void
check_float(float f, int check_shortest)
{
	char		buf[CS_FLOAT_MAXLEN + 8];
	size_t		n;
	float		back;

	memset(buf, '#', sizeof(buf));
	n = cs_format_float(f, buf);
	CHECK(n <= CS_FLOAT_MAXLEN && buf[n] == '#', "bits %08x: length %zu", bits_of(f), n);
	buf[n < sizeof(buf) ? n : sizeof(buf) - 1] = '\0';
	CHECK(is_json_float_text(buf), "bits %08x: \"%s\" is not a JSON float", bits_of(f), buf);
	back = strtof(buf, NULL);
	CHECK(bits_of(back) == bits_of(f), "bits %08x: \"%s\" reads back as %08x",
		  bits_of(f), buf, bits_of(back));
	if (check_shortest && f != 0.0f)
		CHECK(significant_digits(buf) == probe_shortest(f),
			  "bits %08x: \"%s\" is not shortest (%d digits suffice)",
			  bits_of(f), buf, probe_shortest(f));
}

static void
test_format_float_exact_strings(void)
{
	static const struct
	{
		float		f;
		const char *text;
	}			cases[] = {
		{0.1f, "0.1"},
		{1.0f, "1.0"},
		{-0.0f, "-0.0"},
		{0.0f, "0.0"},
		{1e-45f, "1e-45"},
		{-1e-45f, "-1e-45"},
		{FLT_MAX, "3.4028235e38"},
		{FLT_MIN, "1.1754944e-38"},
		{-2.5f, "-2.5"},
		{100.0f, "100.0"},
		{1e6f, "1000000.0"},
		{123456789.0f, "123456790.0"},
		{1e9f, "1e9"},
		{0.00001f, "0.00001"},
		{1.5e-6f, "1.5e-6"},
		{16777216.0f, "16777216.0"},
		{0.3f, "0.3"},
		{3.14159274f, "3.1415927"},
	};
	size_t		i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
	{
		char		buf[CS_FLOAT_MAXLEN + 1];
		size_t		n = cs_format_float(cases[i].f, buf);

		buf[n] = '\0';
		CHECK(strcmp(buf, cases[i].text) == 0, "got \"%s\", want \"%s\"", buf, cases[i].text);
	}
	/* callers must refuse non-finite values; should one slip through, JSON stays valid */
	{
		char		buf[CS_FLOAT_MAXLEN + 1];
		size_t		n = cs_format_float(NAN, buf);

		CHECK(n == 4 && memcmp(buf, "null", 4) == 0, "NaN");
		n = cs_format_float(-INFINITY, buf);
		CHECK(n == 4 && memcmp(buf, "null", 4) == 0, "-Infinity");
	}
}

static void
test_format_float_special_values(void)
{
	static const float values[] = {
		0.0f, -0.0f, 1.0f, -1.0f, 1e-45f, -1e-45f, 2e-45f, FLT_MIN, -FLT_MIN,
		FLT_MAX, -FLT_MAX, FLT_EPSILON, 1.17549421e-38f /* largest denormal */ ,
		0.1f, 0.2f, 0.3f, 1.0f / 3.0f, 2.0f / 3.0f, 16777216.0f, 16777217.0f, 8388608.5f,
		1e-10f, 1e10f, 1e38f, 1e-38f, 9.99999944e-39f, 123456.789f, 0.000123456f,
	};
	size_t		i;
	uint32_t	e;

	for (i = 0; i < sizeof(values) / sizeof(values[0]); i++)
		check_float(values[i], 1);
	/* every power of two (lower gap is half the upper) and its neighbours */
	for (e = 1; e < 255; e++)
	{
		check_float(float_from_bits(e << 23), 1);
		check_float(float_from_bits((e << 23) - 1), 1);
		check_float(float_from_bits((e << 23) + 1), 1);
	}
	/* every small denormal, and integers up to 2^16 */
	for (e = 1; e < 65536; e++)
	{
		check_float(float_from_bits(e), e < 4096);
		check_float((float) e, e < 4096);
	}
	/* powers of ten */
	for (i = 0; i <= 38; i++)
	{
		char		buf[16];

		snprintf(buf, sizeof(buf), "1e%zu", i);
		check_float(strtof(buf, NULL), 1);
		snprintf(buf, sizeof(buf), "1e-%zu", i);
		check_float(strtof(buf, NULL), 1);
	}
}

static void
test_format_float_random_bits(void)
{
	int			done = 0;

	while (done < 1000000)
	{
		uint32_t	bits = (uint32_t) rng_next();

		if ((bits & 0x7f800000) == 0x7f800000)
			continue;
		/* the snprintf probe is slow: compare lengths on a tenth of the values */
		check_float(float_from_bits(bits), done % 10 == 0);
		done++;
	}
}

static void
test_json_float_array(void)
{
	static const float v[] = {1.0f, -0.0f, 0.1f, 1e-45f, -3.5e20f};
	cs_buf		b;

	cs_buf_init_malloc(&b, 0);
	cs_json_float_array(&b, v, 5);
	CHECK(strcmp(b.data, "[1.0,-0.0,0.1,1e-45,-3.5e20]") == 0, "got %s", b.data);
	b.len = 0;
	cs_json_float_array(&b, v, 0);
	CHECK(strcmp(b.data, "[]") == 0, "got %s", b.data);
	cs_buf_free_malloc(&b);
}

static void
test_first_nonfinite(void)
{
	float		v[8] = {0.0f, -0.0f, FLT_MAX, -FLT_MAX, 1e-45f, 1.0f, 2.0f, 3.0f};

	CHECK(cs_first_nonfinite(v, 8) == -1, "all finite");
	CHECK(cs_first_nonfinite(v, 0) == -1, "empty");
	v[3] = NAN;
	CHECK(cs_first_nonfinite(v, 8) == 3, "NaN at 3: %td", cs_first_nonfinite(v, 8));
	CHECK(cs_first_nonfinite(v, 3) == -1, "NaN outside the range");
	v[1] = INFINITY;
	CHECK(cs_first_nonfinite(v, 8) == 1, "+Inf at 1");
	v[0] = -INFINITY;
	CHECK(cs_first_nonfinite(v, 8) == 0, "-Inf at 0");
	v[0] = float_from_bits(0xffc00001);	/* negative NaN with payload */
	CHECK(cs_first_nonfinite(v, 1) == 0, "negative NaN");
}

/* ------------------------------------------------------------ JSON strings */

static const char *
json_of(cs_buf *b, const char *s, size_t n)
{
	b->len = 0;
	cs_json_string(b, s, n);
	return b->data;
}

static void
test_json_string_escapes(void)
{
	static const char *const control[32] = {
		"\\u0000", "\\u0001", "\\u0002", "\\u0003", "\\u0004", "\\u0005", "\\u0006", "\\u0007",
		"\\b", "\\t", "\\n", "\\u000b", "\\f", "\\r", "\\u000e", "\\u000f",
		"\\u0010", "\\u0011", "\\u0012", "\\u0013", "\\u0014", "\\u0015", "\\u0016", "\\u0017",
		"\\u0018", "\\u0019", "\\u001a", "\\u001b", "\\u001c", "\\u001d", "\\u001e", "\\u001f",
	};
	cs_buf		b;
	int			c;

	cs_buf_init_malloc(&b, 0);
	CHECK(strcmp(json_of(&b, "", 0), "\"\"") == 0, "empty: %s", b.data);
	CHECK(strcmp(json_of(&b, "plain", 5), "\"plain\"") == 0, "plain: %s", b.data);
	CHECK(strcmp(json_of(&b, "a\"b", 3), "\"a\\\"b\"") == 0, "quote: %s", b.data);
	CHECK(strcmp(json_of(&b, "a\\b", 3), "\"a\\\\b\"") == 0, "backslash: %s", b.data);
	CHECK(strcmp(json_of(&b, "/", 1), "\"/\"") == 0, "slash stays: %s", b.data);
	CHECK(strcmp(json_of(&b, "\x7f", 1), "\"\\u007f\"") == 0, "DEL: %s", b.data);
	for (c = 0; c < 32; c++)
	{
		char		in[3] = {'x', (char) c, 'y'};
		char		want[16];

		snprintf(want, sizeof(want), "\"x%sy\"", control[c]);
		CHECK(strcmp(json_of(&b, in, 3), want) == 0, "control 0x%02x: %s", c, b.data);
	}
	/* emoji, CJK, Cyrillic, accented Latin: bytes >= 0x80 pass through */
	{
		const char *utf8 = "\xF0\x9F\x98\x80 \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E "
			"\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82 caf\xC3\xA9";
		char		want[128];

		snprintf(want, sizeof(want), "\"%s\"", utf8);
		CHECK(strcmp(json_of(&b, utf8, strlen(utf8)), want) == 0, "UTF-8: %s", b.data);
	}
	/* a NUL inside the string is data, not a terminator */
	CHECK(b.len == strlen(b.data), "NUL terminated");
	json_of(&b, "a\0b", 3);
	CHECK(b.len == 10 && memcmp(b.data, "\"a\\u0000b\"", 10) == 0, "embedded NUL");
	cs_buf_free_malloc(&b);
}

/* Byte-at-a-time reference escaper. */
static size_t
reference_escape(const unsigned char *s, size_t n, char *out)
{
	char	   *p = out;
	size_t		i;

	*p++ = '"';
	for (i = 0; i < n; i++)
	{
		unsigned char c = s[i];

		if (c == '"' || c == '\\')
		{
			*p++ = '\\';
			*p++ = (char) c;
		}
		else if (c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t')
		{
			*p++ = '\\';
			*p++ = c == '\b' ? 'b' : c == '\f' ? 'f' : c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
		}
		else if (c < 0x20 || c == 0x7f)
			p += sprintf(p, "\\u%04x", c);
		else
			*p++ = (char) c;
	}
	*p++ = '"';
	return (size_t) (p - out);
}

static void
test_json_string_random(void)
{
	enum
	{
		MAXLEN = 300
	};
	unsigned char in[MAXLEN];
	char		want[MAXLEN * 6 + 2];
	int			iter;

	for (iter = 0; iter < 20000; iter++)
	{
		size_t		n = (size_t) (rng_next() % MAXLEN);
		int			density = (int) (rng_next() % 4);
		size_t		i;
		size_t		wn;
		cs_buf		b;

		for (i = 0; i < n; i++)
		{
			uint64_t	r = rng_next();

			/* mostly safe text, with escapes sprinkled at varying density */
			if ((int) (r % 64) < density * density * 3)
				in[i] = (unsigned char) ((r >> 8) % 3 == 0 ? '"' : (r >> 8) % 3 == 1 ? '\\' : (r >> 16) % 33);
			else
				in[i] = (unsigned char) (0x20 + (r >> 8) % 0xe0);
			if (in[i] == 32 + 0x5f)
				in[i] = 0x7f;
		}
		wn = reference_escape(in, n, want);
		/* a tiny start buffer so the escape path's reserve has to grow */
		cs_buf_init_malloc(&b, 1);
		cs_buf_puts(&b, "pre");
		cs_json_string(&b, (const char *) in, n);
		CHECK(b.len == wn + 3 && memcmp(b.data + 3, want, wn) == 0,
			  "iteration %d length %zu differs", iter, n);
		cs_buf_free_malloc(&b);
	}
}

/* ------------------------------------------------------------------ bodies */

static const float emb_a[2] = {1.0f, -2.5f};
static const float emb_b[2] = {0.5f, 0.25f};

static void
encode(cs_buf *b, const cs_record *recs, size_t n, size_t dim, cs_float_encoding enc,
	   bool emb, bool doc, bool meta)
{
	cs_body_options opt;

	opt.dim = dim;
	opt.encoding = enc;
	opt.with_embeddings = emb;
	opt.with_documents = doc;
	opt.with_metadatas = meta;
	b->len = 0;
	cs_encode_records(b, recs, n, &opt);
}

static void
test_encode_records_json(void)
{
	cs_record	recs[2] = {
		{"a", 1, emb_a, "doc \"one\"", 9, "{\"k\":1}", 7},
		{"b\n", 2, emb_b, NULL, 0, NULL, 0},
	};
	cs_buf		b;

	cs_buf_init_malloc(&b, 0);
	encode(&b, recs, 2, 2, CS_ENCODING_JSON, true, true, true);
	CHECK(strcmp(b.data,
				 "{\"ids\":[\"a\",\"b\\n\"],\"embeddings\":[[1.0,-2.5],[0.5,0.25]],"
				 "\"documents\":[\"doc \\\"one\\\"\",null],\"metadatas\":[{\"k\":1},null]}") == 0,
		  "got %s", b.data);
	CHECK(b.len == strlen(b.data), "len matches");

	recs[1].embedding = NULL;
	encode(&b, recs, 2, 2, CS_ENCODING_JSON, true, false, false);
	CHECK(strcmp(b.data, "{\"ids\":[\"a\",\"b\\n\"],\"embeddings\":[[1.0,-2.5],null]}") == 0,
		  "got %s", b.data);

	encode(&b, recs, 1, 2, CS_ENCODING_JSON, false, true, false);
	CHECK(strcmp(b.data, "{\"ids\":[\"a\"],\"documents\":[\"doc \\\"one\\\"\"]}") == 0,
		  "got %s", b.data);

	encode(&b, recs, 2, 2, CS_ENCODING_JSON, false, false, true);
	CHECK(strcmp(b.data, "{\"ids\":[\"a\",\"b\\n\"],\"metadatas\":[{\"k\":1},null]}") == 0,
		  "got %s", b.data);

	encode(&b, recs, 0, 2, CS_ENCODING_JSON, true, true, true);
	CHECK(strcmp(b.data, "{\"ids\":[],\"embeddings\":[],\"documents\":[],\"metadatas\":[]}") == 0,
		  "got %s", b.data);
	cs_buf_free_malloc(&b);
}

static void
test_encode_records_base64(void)
{
	cs_record	recs[3] = {
		{"a", 1, emb_a, "x", 1, "{}", 2},
		{"b", 1, NULL, NULL, 0, NULL, 0},
		{"\xC3\xA9", 2, emb_b, "", 0, "{\"t\":\"\xF0\x9F\x98\x80\"}", 12},
	};
	cs_buf		b;

	cs_buf_init_malloc(&b, 0);
	encode(&b, recs, 3, 2, CS_ENCODING_BASE64, true, true, true);
	CHECK(strcmp(b.data,
				 "{\"ids\":[\"a\",\"b\",\"\xC3\xA9\"],"
				 "\"embeddings\":[\"AACAPwAAIMA=\",null,\"AAAAPwAAgD4=\"],"
				 "\"documents\":[\"x\",null,\"\"],"
				 "\"metadatas\":[{},null,{\"t\":\"\xF0\x9F\x98\x80\"}]}") == 0,
		  "got %s", b.data);

	encode(&b, recs, 1, 2, CS_ENCODING_BASE64, true, false, false);
	CHECK(strcmp(b.data, "{\"ids\":[\"a\"],\"embeddings\":[\"AACAPwAAIMA=\"]}") == 0,
		  "got %s", b.data);

	encode(&b, recs, 2, 0, CS_ENCODING_BASE64, true, false, false);
	CHECK(strcmp(b.data, "{\"ids\":[\"a\",\"b\"],\"embeddings\":[\"\",null]}") == 0,
		  "dim 0: got %s", b.data);
	cs_buf_free_malloc(&b);
}

static void
test_encode_ids(void)
{
	cs_record	recs[3] = {
		{"x", 1, NULL, NULL, 0, NULL, 0},
		{"y\\z", 3, NULL, NULL, 0, NULL, 0},
		{"", 0, NULL, NULL, 0, NULL, 0},
	};
	cs_buf		b;

	cs_buf_init_malloc(&b, 0);
	cs_encode_ids(&b, recs, 3);
	CHECK(strcmp(b.data, "{\"ids\":[\"x\",\"y\\\\z\",\"\"]}") == 0, "got %s", b.data);
	b.len = 0;
	cs_encode_ids(&b, recs, 0);
	CHECK(strcmp(b.data, "{\"ids\":[]}") == 0, "got %s", b.data);
	cs_buf_free_malloc(&b);
}

/* A grow callback that counts its calls, as the extension's palloc-based one would. */
static int	grow_calls;

static void
counting_grow(cs_buf *b, size_t need)
{
	size_t		cap = b->cap * 2;

	grow_calls++;
	if (cap < b->len + need + 1)
		cap = b->len + need + 1;
	b->data = realloc(b->data, cap);
	if (b->data == NULL)
		abort();
	b->cap = cap;
}

static void
test_buffer_growth(void)
{
	enum
	{
		N = 1000, DIM = 1536
	};
	float	   *emb = malloc(sizeof(float) * DIM);
	cs_record  *recs = malloc(sizeof(cs_record) * N);
	char		ids[N][8];
	cs_buf		b;
	cs_body_options opt = {DIM, CS_ENCODING_BASE64, true, false, false};
	size_t		i;
	size_t		expect;

	for (i = 0; i < DIM; i++)
		emb[i] = (float) i * 0.5f;
	for (i = 0; i < N; i++)
	{
		snprintf(ids[i], sizeof(ids[i]), "%zu", i);
		recs[i] = (cs_record)
		{
			ids[i], strlen(ids[i]), emb, NULL, 0, NULL, 0
		};
	}
	b.data = malloc(16);
	b.len = 0;
	b.cap = 16;
	b.grow = counting_grow;
	b.ctx = NULL;
	grow_calls = 0;
	cs_encode_records(&b, recs, N, &opt);
	expect = strlen("{\"ids\":[") + (N - 1) + strlen("],\"embeddings\":[") + (N - 1) + 2;
	for (i = 0; i < N; i++)
		expect += strlen(ids[i]) + 2 + cs_base64_len(DIM * 4) + 2;
	CHECK(b.len == expect && b.len == strlen(b.data), "length %zu, want %zu", b.len, expect);
	/* geometric growth for the ids, then one reserve for the whole embeddings column */
	CHECK(grow_calls <= 16, "%d grow calls", grow_calls);
	free(b.data);

	/* the malloc buffer: many small appends */
	cs_buf_init_malloc(&b, 0);
	for (i = 0; i < 100000; i++)
		cs_buf_putc(&b, (char) ('a' + i % 26));
	cs_buf_append(&b, "", 0);
	CHECK(b.len == 100000 && b.data[99999] == 'a' + 99999 % 26 && b.data[100000] == '\0',
		  "putc growth");
	cs_buf_free_malloc(&b);
	CHECK(b.data == NULL && b.len == 0, "freed");
	free(emb);
	free(recs);
}

int
main(int argc, char **argv)
{
	if (argc > 2 && strcmp(argv[1], "--expect-impl") == 0)
		return expect_impl(argv[2]);

	TEST(test_base64_rfc4648);
	TEST(test_base64_known_floats);
	TEST(test_base64_vectors_match_scalar);
	TEST(test_base64_env_caps_dispatch);
	TEST(test_format_float_exact_strings);
	TEST(test_format_float_special_values);
	TEST(test_format_float_random_bits);
	TEST(test_json_float_array);
	TEST(test_first_nonfinite);
	TEST(test_json_string_escapes);
	TEST(test_json_string_random);
	TEST(test_encode_records_json);
	TEST(test_encode_records_base64);
	TEST(test_encode_ids);
	TEST(test_buffer_growth);

	printf("unit: %d passed, %d failed\n", cases_passed, cases_failed);
	return cases_failed > 0 ? 1 : 0;
}
