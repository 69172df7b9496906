/*
 * encode.c — the Chroma column body: buffers, JSON strings, shortest floats and the
 * record bodies (base64 itself is base64.c).
 *
 * Plain C11 and libc, no Postgres headers: the same object is linked into the
 * extension, the unit tests, the fuzz target and the benchmark. Every writer reserves
 * its worst case once and then stores through a plain pointer, so hot loops carry no
 * per-byte capacity checks.
 */
#include "encode.h"

#include <stdlib.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define CS_BIG_ENDIAN 1
#endif

/* ---------------------------------------------------------------- buffers */

static void
cs_malloc_grow(cs_buf *b, size_t need)
{
	size_t		want;
	size_t		cap;
	char	   *data;

	if (need > SIZE_MAX - b->len - 1)
		abort();
	want = b->len + need + 1;
	cap = b->cap < 64 ? 64 : b->cap;
	while (cap < want)
	{
		if (cap > SIZE_MAX / 2)
		{
			cap = want;
			break;
		}
		cap *= 2;
	}
	data = realloc(b->data, cap);
	if (data == NULL)
		abort();
	b->data = data;
	b->cap = cap;
}

void
cs_buf_init_malloc(cs_buf *b, size_t initial)
{
	if (initial < 64)
		initial = 64;
	b->data = malloc(initial);
	if (b->data == NULL)
		abort();
	b->data[0] = '\0';
	b->len = 0;
	b->cap = initial;
	b->grow = cs_malloc_grow;
	b->ctx = NULL;
}

void
cs_buf_free_malloc(cs_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
}

void
cs_buf_append(cs_buf *b, const char *s, size_t n)
{
	cs_buf_reserve(b, n);
	if (n > 0)
		memcpy(b->data + b->len, s, n);
	b->len += n;
	b->data[b->len] = '\0';
}

void
cs_buf_puts(cs_buf *b, const char *s)
{
	cs_buf_append(b, s, strlen(s));
}

/* ------------------------------------------------------------ JSON strings */

/* 0: copied as is; otherwise the letter after the backslash ('u' = \u00XX). */
static const unsigned char cs_json_escape[256] = {
	'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u', 'b', 't', 'n', 'u', 'f', 'r', 'u', 'u',
	'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u',
	0, 0, '"', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, '\\', 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 'u',
	/* 0x80..0xff: UTF-8 continuation and lead bytes pass through */
};

#define CS_ONES UINT64_C(0x0101010101010101)
#define CS_HIGHS UINT64_C(0x8080808080808080)

/* True when any of the 8 bytes needs escaping (exact: no false positives). */
static inline bool
cs_word_needs_escape(uint64_t w)
{
	uint64_t	quote = w ^ (CS_ONES * '"');
	uint64_t	backslash = w ^ (CS_ONES * '\\');
	uint64_t	del = w ^ (CS_ONES * 0x7f);
	uint64_t	hit;

	hit = (w - CS_ONES * 0x20) & ~w;	/* a byte below 0x20 */
	hit |= (quote - CS_ONES) & ~quote;
	hit |= (backslash - CS_ONES) & ~backslash;
	hit |= (del - CS_ONES) & ~del;
	return (hit & CS_HIGHS) != 0;
}

/* Sized by its literal, NUL included (gcc 15 warns when a table has no room for it). */
static const char cs_hex[] = "0123456789abcdef";

void
cs_json_string(cs_buf *b, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *) s;
	const unsigned char *end = p + n;
	char	   *out;

	cs_buf_reserve(b, n + 2);
	out = b->data + b->len;
	*out++ = '"';
	while (p < end)
	{
		const unsigned char *run = p;
		unsigned char c;
		unsigned char e;

		while (end - p >= 8)
		{
			uint64_t	w;

			memcpy(&w, p, 8);
			if (cs_word_needs_escape(w))
				break;
			p += 8;
		}
		while (p < end && cs_json_escape[*p] == 0)
			p++;
		if (p > run)
		{
			memcpy(out, run, (size_t) (p - run));
			out += p - run;
		}
		if (p == end)
			break;

		/* an escape grows the output by up to 5 bytes beyond what was reserved */
		b->len = (size_t) (out - b->data);
		cs_buf_reserve(b, (size_t) (end - p) + 6);
		out = b->data + b->len;

		c = *p++;
		e = cs_json_escape[c];
		*out++ = '\\';
		if (e == 'u')
		{
			out[0] = 'u';
			out[1] = '0';
			out[2] = '0';
			out[3] = cs_hex[c >> 4];
			out[4] = cs_hex[c & 15];
			out += 5;
		}
		else
			*out++ = (char) e;
	}
	*out++ = '"';
	b->len = (size_t) (out - b->data);
	b->data[b->len] = '\0';
}

/* ---------------------------------------------------------- shortest float */

/*
 * Shortest round-trip decimal of a binary32 value, by the Schubfach method: scale the
 * rounding interval's bounds by a 64-bit approximation of a power of ten (rounded to
 * odd so comparisons stay exact), then pick the shortest decimal inside the interval,
 * the one nearest the value when several have that length. This is several times
 * faster than probing snprintf precisions with strtof; the unit tests compare it with
 * that probe.
 */

/* ceil(10^k * 2^(63 - floor(log2(10^k)))) for k = -31..45 */
static const uint64_t cs_pow10_sig[] = {
	UINT64_C(0x81CEB32C4B43FCF5),	/* 1e-31 */
	UINT64_C(0xA2425FF75E14FC32),	/* 1e-30 */
	UINT64_C(0xCAD2F7F5359A3B3F),	/* 1e-29 */
	UINT64_C(0xFD87B5F28300CA0E),	/* 1e-28 */
	UINT64_C(0x9E74D1B791E07E49),	/* 1e-27 */
	UINT64_C(0xC612062576589DDB),	/* 1e-26 */
	UINT64_C(0xF79687AED3EEC552),	/* 1e-25 */
	UINT64_C(0x9ABE14CD44753B53),	/* 1e-24 */
	UINT64_C(0xC16D9A0095928A28),	/* 1e-23 */
	UINT64_C(0xF1C90080BAF72CB2),	/* 1e-22 */
	UINT64_C(0x971DA05074DA7BEF),	/* 1e-21 */
	UINT64_C(0xBCE5086492111AEB),	/* 1e-20 */
	UINT64_C(0xEC1E4A7DB69561A6),	/* 1e-19 */
	UINT64_C(0x9392EE8E921D5D08),	/* 1e-18 */
	UINT64_C(0xB877AA3236A4B44A),	/* 1e-17 */
	UINT64_C(0xE69594BEC44DE15C),	/* 1e-16 */
	UINT64_C(0x901D7CF73AB0ACDA),	/* 1e-15 */
	UINT64_C(0xB424DC35095CD810),	/* 1e-14 */
	UINT64_C(0xE12E13424BB40E14),	/* 1e-13 */
	UINT64_C(0x8CBCCC096F5088CC),	/* 1e-12 */
	UINT64_C(0xAFEBFF0BCB24AAFF),	/* 1e-11 */
	UINT64_C(0xDBE6FECEBDEDD5BF),	/* 1e-10 */
	UINT64_C(0x89705F4136B4A598),	/* 1e-9 */
	UINT64_C(0xABCC77118461CEFD),	/* 1e-8 */
	UINT64_C(0xD6BF94D5E57A42BD),	/* 1e-7 */
	UINT64_C(0x8637BD05AF6C69B6),	/* 1e-6 */
	UINT64_C(0xA7C5AC471B478424),	/* 1e-5 */
	UINT64_C(0xD1B71758E219652C),	/* 1e-4 */
	UINT64_C(0x83126E978D4FDF3C),	/* 1e-3 */
	UINT64_C(0xA3D70A3D70A3D70B),	/* 1e-2 */
	UINT64_C(0xCCCCCCCCCCCCCCCD),	/* 1e-1 */
	UINT64_C(0x8000000000000000),	/* 1e0 */
	UINT64_C(0xA000000000000000),	/* 1e1 */
	UINT64_C(0xC800000000000000),	/* 1e2 */
	UINT64_C(0xFA00000000000000),	/* 1e3 */
	UINT64_C(0x9C40000000000000),	/* 1e4 */
	UINT64_C(0xC350000000000000),	/* 1e5 */
	UINT64_C(0xF424000000000000),	/* 1e6 */
	UINT64_C(0x9896800000000000),	/* 1e7 */
	UINT64_C(0xBEBC200000000000),	/* 1e8 */
	UINT64_C(0xEE6B280000000000),	/* 1e9 */
	UINT64_C(0x9502F90000000000),	/* 1e10 */
	UINT64_C(0xBA43B74000000000),	/* 1e11 */
	UINT64_C(0xE8D4A51000000000),	/* 1e12 */
	UINT64_C(0x9184E72A00000000),	/* 1e13 */
	UINT64_C(0xB5E620F480000000),	/* 1e14 */
	UINT64_C(0xE35FA931A0000000),	/* 1e15 */
	UINT64_C(0x8E1BC9BF04000000),	/* 1e16 */
	UINT64_C(0xB1A2BC2EC5000000),	/* 1e17 */
	UINT64_C(0xDE0B6B3A76400000),	/* 1e18 */
	UINT64_C(0x8AC7230489E80000),	/* 1e19 */
	UINT64_C(0xAD78EBC5AC620000),	/* 1e20 */
	UINT64_C(0xD8D726B7177A8000),	/* 1e21 */
	UINT64_C(0x878678326EAC9000),	/* 1e22 */
	UINT64_C(0xA968163F0A57B400),	/* 1e23 */
	UINT64_C(0xD3C21BCECCEDA100),	/* 1e24 */
	UINT64_C(0x84595161401484A0),	/* 1e25 */
	UINT64_C(0xA56FA5B99019A5C8),	/* 1e26 */
	UINT64_C(0xCECB8F27F4200F3A),	/* 1e27 */
	UINT64_C(0x813F3978F8940985),	/* 1e28 */
	UINT64_C(0xA18F07D736B90BE6),	/* 1e29 */
	UINT64_C(0xC9F2C9CD04674EDF),	/* 1e30 */
	UINT64_C(0xFC6F7C4045812297),	/* 1e31 */
	UINT64_C(0x9DC5ADA82B70B59E),	/* 1e32 */
	UINT64_C(0xC5371912364CE306),	/* 1e33 */
	UINT64_C(0xF684DF56C3E01BC7),	/* 1e34 */
	UINT64_C(0x9A130B963A6C115D),	/* 1e35 */
	UINT64_C(0xC097CE7BC90715B4),	/* 1e36 */
	UINT64_C(0xF0BDC21ABB48DB21),	/* 1e37 */
	UINT64_C(0x96769950B50D88F5),	/* 1e38 */
	UINT64_C(0xBC143FA4E250EB32),	/* 1e39 */
	UINT64_C(0xEB194F8E1AE525FE),	/* 1e40 */
	UINT64_C(0x92EFD1B8D0CF37BF),	/* 1e41 */
	UINT64_C(0xB7ABC627050305AE),	/* 1e42 */
	UINT64_C(0xE596B7B0C643C71A),	/* 1e43 */
	UINT64_C(0x8F7E32CE7BEA5C70),	/* 1e44 */
	UINT64_C(0xB35DBF821AE4F38C),	/* 1e45 */
};

#define CS_POW10_MIN (-31)

static inline int32_t
cs_floor_shift(int32_t x, int n)
{
	return x >= 0 ? x >> n : ~((~x) >> n);
}

static inline uint32_t
cs_round_to_odd(uint64_t g, uint32_t cp)
{
#ifdef __SIZEOF_INT128__
	unsigned __int128 p = (unsigned __int128) g * cp;
	uint32_t	y1 = (uint32_t) (p >> 64);
	uint32_t	y0 = (uint32_t) (p >> 32);
#else
	/* bits 32..95 of the 96-bit product g * cp, from two 64-bit products */
	uint64_t	low = (g & 0xffffffff) * cp;
	uint64_t	high = (g >> 32) * cp;
	uint64_t	mid = (high & 0xffffffff) + (low >> 32);
	uint32_t	y1 = (uint32_t) ((high >> 32) + (mid >> 32));
	uint32_t	y0 = (uint32_t) mid;
#endif

	return y1 | (y0 > 1);
}

/* bits: a positive finite nonzero float's bits; value = *digits * 10^*exp10 */
static void
cs_float_decimal(uint32_t bits, uint32_t *digits, int32_t *exp10)
{
	uint32_t	ieee_sig = bits & 0x7fffff;
	uint32_t	ieee_exp = bits >> 23;
	uint32_t	c;
	int32_t		q;
	bool		closer_below;
	bool		even;
	uint32_t	cbl, cb, cbr;
	int32_t		k, h;
	uint64_t	g;
	uint32_t	vbl, vb, vbr, lower, upper, s;
	bool		u_in, w_in;

	if (ieee_exp != 0)
	{
		c = ieee_sig | 0x800000;
		q = (int32_t) ieee_exp - 150;
		/* small integers are their own shortest form */
		if (q <= 0 && -q < 24)
		{
			uint32_t	m = c >> -q;

			if ((m << -q) == c)
			{
				*digits = m;
				*exp10 = 0;
				return;
			}
		}
	}
	else
	{
		c = ieee_sig;
		q = -149;
	}

	even = (c & 1) == 0;
	closer_below = ieee_sig == 0 && ieee_exp > 1;
	cbl = 4 * c - 2 + closer_below;
	cb = 4 * c;
	cbr = 4 * c + 2;

	/* k = floor(log10(2^q)), or floor(log10(3/4 * 2^q)) when the lower gap is half */
	k = cs_floor_shift(q * 1262611 - (closer_below ? 524031 : 0), 22);
	h = q + cs_floor_shift(-k * 1741647, 19) + 1;
	g = cs_pow10_sig[-k - CS_POW10_MIN];

	vbl = cs_round_to_odd(g, cbl << h);
	vb = cs_round_to_odd(g, cb << h);
	vbr = cs_round_to_odd(g, cbr << h);
	lower = vbl + !even;
	upper = vbr - !even;

	s = vb / 4;
	if (s >= 10)
	{
		uint32_t	sp = s / 10;
		bool		up_in = lower <= 40 * sp;
		bool		wp_in = 40 * sp + 40 <= upper;

		if (up_in != wp_in)
		{
			*digits = sp + wp_in;
			*exp10 = k + 1;
			return;
		}
	}
	u_in = lower <= 4 * s;
	w_in = 4 * s + 4 <= upper;
	if (u_in != w_in)
	{
		*digits = s + w_in;
		*exp10 = k;
		return;
	}
	{
		uint32_t	mid = 4 * s + 2;
		bool		round_up = vb > mid || (vb == mid && (s & 1) != 0);

		*digits = s + round_up;
		*exp10 = k;
	}
}

/* Sized by its literal, NUL included (gcc 15 warns when a table has no room for it). */
static const char cs_digit_pairs[] =
"0001020304050607080910111213141516171819"
"2021222324252627282930313233343536373839"
"4041424344454647484950515253545556575859"
"6061626364656667686970717273747576777879"
"8081828384858687888990919293949596979899";

/*
 * The 8 decimal digits of v (< 10^8) as byte values 0..9 in one register, first digit
 * in the lowest byte: split in halves of 4, then 2, then 1 digit, all lanes at once
 * (x * 10486 >> 20 is x / 100 below 10^4; x * 103 >> 10 is x / 10 below 100).
 */
static inline uint64_t
cs_eight_digits(uint32_t v)
{
	uint64_t	x = (uint64_t) (v / 10000) | (uint64_t) (v % 10000) << 32;
	uint64_t	hundreds = ((x * 10486) >> 20) & UINT64_C(0x0000007F0000007F);
	uint64_t	tens;

	x = hundreds | (x - hundreds * 100) << 16;
	tens = ((x * 103) >> 10) & UINT64_C(0x000F000F000F000F);
	return tens | (x - tens * 10) << 8;
}

/* Stores 8 characters held first-in-lowest-byte. */
static inline void
cs_store_chars(char *p, uint64_t chars)
{
#ifdef CS_BIG_ENDIAN
	chars = __builtin_bswap64(chars);
#endif
	memcpy(p, &chars, 8);
}

static const uint32_t cs_pow10_u32[10] = {
	1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000
};

/* Digits in v (0 < v < 10^9): log10 estimated from the bit length, then corrected. */
static inline int
cs_decimal_length(uint32_t v)
{
	int			t = ((32 - __builtin_clz(v)) * 1233) >> 12;

	return t + (v >= cs_pow10_u32[t]);
}

#define ASCII_ZEROS UINT64_C(0x3030303030303030)

static inline size_t
cs_write_float(float f, char *dst)
{
	uint32_t	bits;
	uint32_t	digits;
	int32_t		exp10;
	uint64_t	first8;
	char		ninth;
	int			nd;
	int			sci;
	char	   *p = dst;

	memcpy(&bits, &f, sizeof(bits));
	if ((bits & 0x7f800000) == 0x7f800000)
	{
		memcpy(dst, "null", 4);
		return 4;
	}
	if (bits >> 31)
		*p++ = '-';
	bits &= 0x7fffffff;
	if (bits == 0)
	{
		memcpy(p, "0.0", 3);
		return (size_t) (p + 3 - dst);
	}

	cs_float_decimal(bits, &digits, &exp10);
	while (digits % 10 == 0)
	{
		digits /= 10;
		exp10++;
	}
	nd = cs_decimal_length(digits);
	sci = exp10 + nd - 1;

	/*
	 * The digits, left-aligned and '0'-padded: the first 8 in a register, the 9th
	 * apart. Built and stored from registers, never reloaded from memory.
	 */
	if (nd == 9)
	{
		first8 = cs_eight_digits(digits / 10) + ASCII_ZEROS;
		ninth = (char) ('0' + digits % 10);
	}
	else
	{
		first8 = (cs_eight_digits(digits) >> (8 * (8 - nd))) + ASCII_ZEROS;
		ninth = '0';
	}

	if (sci < -5 || sci > 8)
	{
		int			e = sci;

		p[0] = (char) first8;
		p[1] = '.';
		cs_store_chars(p + 2, first8 >> 8);
		p[9] = ninth;
		p += nd > 1 ? nd + 1 : 1;
		*p++ = 'e';
		if (e < 0)
		{
			*p++ = '-';
			e = -e;
		}
		memcpy(p, cs_digit_pairs + e * 2 + (e < 10), 2);
		p += 1 + (e >= 10);
	}
	else if (exp10 >= 0)
	{
		/* an integer below 10^9: the digits padded with zeros, then ".0" */
		cs_store_chars(p, first8);
		p[8] = ninth;
		p += sci + 1;
		memcpy(p, ".0", 2);
		p += 2;
	}
	else if (sci >= 0)
	{
		/* digits, '.', the remaining digits (sci <= 7 here) */
		cs_store_chars(p, first8);
		cs_store_chars(p + sci + 2,
					   first8 >> (8 * (sci + 1)) | (uint64_t) (unsigned char) ninth << (8 * (7 - sci)));
		p[sci + 1] = '.';
		p += nd + 1;
	}
	else
	{
		/* "0." and -sci-1 zeros (at most 4), then the digits */
		memcpy(p, "0.0000", 6);
		cs_store_chars(p + 1 - sci, first8);
		p[9 - sci] = ninth;
		p += 1 - sci + nd;
	}
	return (size_t) (p - dst);
}

/* The public form writes exactly the returned length. */
size_t
cs_format_float(float f, char *dst)
{
	char		tmp[CS_FLOAT_MAXLEN];
	size_t		n = cs_write_float(f, tmp);

	memcpy(dst, tmp, n);
	return n;
}

/* ---------------------------------------------------------------- floats */

void
cs_json_float_array(cs_buf *b, const float *v, size_t n)
{
	char	   *out;
	size_t		i;

	cs_buf_reserve(b, n * (CS_FLOAT_MAXLEN + 1) + 2);
	out = b->data + b->len;
	*out++ = '[';
	for (i = 0; i < n; i++)
	{
		if (i > 0)
			*out++ = ',';
		out += cs_write_float(v[i], out);
	}
	*out++ = ']';
	b->len = (size_t) (out - b->data);
	b->data[b->len] = '\0';
}

/* Writes the base64 of n floats as little-endian float32; returns the characters written. */
static size_t
cs_base64_floats(const float *v, size_t n, char *out)
{
#ifdef CS_BIG_ENDIAN
	/* 192 floats = 768 bytes, a multiple of 3, so chunks join without padding */
	unsigned char swapped[192 * 4];
	char	   *start = out;

	while (n > 0)
	{
		size_t		chunk = n < 192 ? n : 192;
		size_t		i;

		for (i = 0; i < chunk; i++)
		{
			uint32_t	w;

			memcpy(&w, &v[i], 4);
			w = __builtin_bswap32(w);
			memcpy(swapped + i * 4, &w, 4);
		}
		out += cs_base64_encode(swapped, chunk * 4, out);
		v += chunk;
		n -= chunk;
	}
	return (size_t) (out - start);
#else
	return cs_base64_encode((const unsigned char *) v, n * sizeof(float), out);
#endif
}

void
cs_embedding_base64(cs_buf *b, const float *v, size_t n)
{
	char	   *out;

	cs_buf_reserve(b, cs_base64_len(n * sizeof(float)) + 2);
	out = b->data + b->len;
	*out++ = '"';
	out += cs_base64_floats(v, n, out);
	*out++ = '"';
	b->len = (size_t) (out - b->data);
	b->data[b->len] = '\0';
}

ptrdiff_t
cs_first_nonfinite(const float *v, size_t n)
{
	size_t		i;

	for (i = 0; i < n; i++)
	{
		uint32_t	bits;

		memcpy(&bits, &v[i], sizeof(bits));
		if ((bits & 0x7f800000) == 0x7f800000)
			return (ptrdiff_t) i;
	}
	return -1;
}

/* ----------------------------------------------------------- record bodies */

#define CS_APPEND_LITERAL(b, lit) cs_buf_append((b), (lit), sizeof(lit) - 1)

static void
cs_encode_ids_array(cs_buf *b, const cs_record *recs, size_t n)
{
	size_t		i;

	cs_buf_putc(b, '[');
	for (i = 0; i < n; i++)
	{
		if (i > 0)
			cs_buf_putc(b, ',');
		cs_json_string(b, recs[i].id, recs[i].id_len);
	}
	cs_buf_putc(b, ']');
}

static void
cs_encode_embeddings_base64(cs_buf *b, const cs_record *recs, size_t n, size_t dim)
{
	/* quotes and comma per record; "null," must fit too */
	size_t		per = cs_base64_len(dim * sizeof(float)) + 3;
	char	   *out;
	size_t		i;

	if (per < 5)
		per = 5;
	cs_buf_reserve(b, n * per + 2);
	out = b->data + b->len;
	*out++ = '[';
	for (i = 0; i < n; i++)
	{
		if (i > 0)
			*out++ = ',';
		if (recs[i].embedding == NULL)
		{
			memcpy(out, "null", 4);
			out += 4;
			continue;
		}
		*out++ = '"';
		out += cs_base64_floats(recs[i].embedding, dim, out);
		*out++ = '"';
	}
	*out++ = ']';
	b->len = (size_t) (out - b->data);
}

static void
cs_encode_embeddings_json(cs_buf *b, const cs_record *recs, size_t n, size_t dim)
{
	/* worst case per record: each float and its comma, brackets, the comma before */
	size_t		per = dim * (CS_FLOAT_MAXLEN + 1) + 3;
	size_t		i;

	if (per < 5)
		per = 5;
	cs_buf_putc(b, '[');
	for (i = 0; i < n; i++)
	{
		const float *v = recs[i].embedding;
		char	   *out;
		size_t		j;

		cs_buf_reserve(b, per);
		out = b->data + b->len;
		if (i > 0)
			*out++ = ',';
		if (v == NULL)
		{
			memcpy(out, "null", 4);
			out += 4;
		}
		else
		{
			*out++ = '[';
			for (j = 0; j < dim; j++)
			{
				if (j > 0)
					*out++ = ',';
				out += cs_write_float(v[j], out);
			}
			*out++ = ']';
		}
		b->len = (size_t) (out - b->data);
	}
	cs_buf_putc(b, ']');
}

void
cs_encode_records(cs_buf *b, const cs_record *recs, size_t n,
				  const cs_body_options *opt)
{
	size_t		i;

	CS_APPEND_LITERAL(b, "{\"ids\":");
	cs_encode_ids_array(b, recs, n);

	if (opt->with_embeddings)
	{
		CS_APPEND_LITERAL(b, ",\"embeddings\":");
		if (opt->encoding == CS_ENCODING_BASE64)
			cs_encode_embeddings_base64(b, recs, n, opt->dim);
		else
			cs_encode_embeddings_json(b, recs, n, opt->dim);
	}

	if (opt->with_documents)
	{
		CS_APPEND_LITERAL(b, ",\"documents\":[");
		for (i = 0; i < n; i++)
		{
			if (i > 0)
				cs_buf_putc(b, ',');
			if (recs[i].document == NULL)
				CS_APPEND_LITERAL(b, "null");
			else
				cs_json_string(b, recs[i].document, recs[i].document_len);
		}
		cs_buf_putc(b, ']');
	}

	if (opt->with_metadatas)
	{
		CS_APPEND_LITERAL(b, ",\"metadatas\":[");
		for (i = 0; i < n; i++)
		{
			if (i > 0)
				cs_buf_putc(b, ',');
			/* an empty text would make the body invalid: treat it as no metadata */
			if (recs[i].metadata == NULL || recs[i].metadata_len == 0)
				CS_APPEND_LITERAL(b, "null");
			else
				cs_buf_append(b, recs[i].metadata, recs[i].metadata_len);
		}
		cs_buf_putc(b, ']');
	}

	cs_buf_putc(b, '}');
	b->data[b->len] = '\0';
}

void
cs_encode_ids(cs_buf *b, const cs_record *recs, size_t n)
{
	CS_APPEND_LITERAL(b, "{\"ids\":");
	cs_encode_ids_array(b, recs, n);
	cs_buf_putc(b, '}');
	b->data[b->len] = '\0';
}
