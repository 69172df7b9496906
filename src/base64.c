/*
 * base64.c — base64 of raw bytes (the float32 embeddings of a column body): a scalar
 * encoder, AVX2 and AVX-512 VBMI encoders, and the choice among them at the first call.
 *
 * Plain C11 and libc, no Postgres headers, like encode.c: linked into the extension, the
 * unit tests, the fuzz target and the benchmark. Every encoder produces the same output as
 * the scalar one (tested on every length from 0 to 4,096 bytes).
 */
#include "encode.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define CS_HAVE_AVX2 1
#include <immintrin.h>
#endif


/* Sized by its literal, NUL included (gcc 15 warns when a table has no room for it). */
static const char cs_b64_alphabet[] =
"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* The alphabet as a constant expression, so the pair table below is built at compile time. */
#define B64C(i) ((char) ((i) < 26 ? 'A' + (i) : (i) < 52 ? 'a' + (i) - 26 : \
						 (i) < 62 ? '0' + (i) - 52 : (i) == 62 ? '+' : '/'))
#define B64P4(h, l) {B64C(h), B64C(l)}, {B64C(h), B64C((l) + 1)}, \
	{B64C(h), B64C((l) + 2)}, {B64C(h), B64C((l) + 3)}
#define B64P16(h, l) B64P4(h, l), B64P4(h, (l) + 4), B64P4(h, (l) + 8), B64P4(h, (l) + 12)
#define B64P64(h) B64P16(h, 0), B64P16(h, 16), B64P16(h, 32), B64P16(h, 48)
#define B64H4(h) B64P64(h), B64P64((h) + 1), B64P64((h) + 2), B64P64((h) + 3)
#define B64H16(h) B64H4(h), B64H4((h) + 4), B64H4((h) + 8), B64H4((h) + 12)

/* The two output characters for every 12-bit value: one lookup per half of a 3-byte group. */
static const char cs_b64_pairs[4096][2] = {
	B64H16(0), B64H16(16), B64H16(32), B64H16(48)
};

#undef B64H16
#undef B64H4
#undef B64P64
#undef B64P16
#undef B64P4
#undef B64C

static inline void
cs_b64_put_group(char *out, uint32_t v)
{
	memcpy(out, cs_b64_pairs[v >> 12], 2);
	memcpy(out + 2, cs_b64_pairs[v & 0xfff], 2);
}

size_t
cs_base64_encode_scalar(const unsigned char *src, size_t n, char *dst)
{
	char	   *out = dst;
	size_t		i = 0;

	/* four groups per iteration: 12 bytes in, 16 characters out */
	for (; i + 12 <= n; i += 12, out += 16)
	{
		const unsigned char *s = src + i;

		cs_b64_put_group(out, (uint32_t) s[0] << 16 | (uint32_t) s[1] << 8 | s[2]);
		cs_b64_put_group(out + 4, (uint32_t) s[3] << 16 | (uint32_t) s[4] << 8 | s[5]);
		cs_b64_put_group(out + 8, (uint32_t) s[6] << 16 | (uint32_t) s[7] << 8 | s[8]);
		cs_b64_put_group(out + 12, (uint32_t) s[9] << 16 | (uint32_t) s[10] << 8 | s[11]);
	}
	for (; i + 3 <= n; i += 3, out += 4)
		cs_b64_put_group(out, (uint32_t) src[i] << 16 | (uint32_t) src[i + 1] << 8 | src[i + 2]);

	if (n - i == 1)
	{
		uint32_t	v = src[i];

		out[0] = cs_b64_alphabet[v >> 2];
		out[1] = cs_b64_alphabet[(v & 3) << 4];
		out[2] = '=';
		out[3] = '=';
		out += 4;
	}
	else if (n - i == 2)
	{
		uint32_t	v = (uint32_t) src[i] << 8 | src[i + 1];

		out[0] = cs_b64_alphabet[v >> 10];
		out[1] = cs_b64_alphabet[(v >> 4) & 63];
		out[2] = cs_b64_alphabet[(v & 15) << 2];
		out[3] = '=';
		out += 4;
	}
	return (size_t) (out - dst);
}

#ifdef CS_HAVE_AVX2

/*
 * 24 input bytes -> 32 characters per step. The load starts 4 bytes early so that
 * the low lane holds bytes 0..11 at offsets 4..15 and the high lane bytes 12..23 at
 * offsets 0..11; a byte shuffle then gives every 32-bit lane its 3 bytes as
 * [b1 b0 b2 b1], from which mulhi/mullo pull the four 6-bit indices into bytes.
 */
__attribute__((target("avx2")))
static inline __m256i
cs_b64_avx2_block(__m256i in)
{
	const __m256i shuffle = _mm256_set_epi8(10, 11, 9, 10, 7, 8, 6, 7,
											4, 5, 3, 4, 1, 2, 0, 1,
											14, 15, 13, 14, 11, 12, 10, 11,
											8, 9, 7, 8, 5, 6, 4, 5);
	/* per character class: what to add to the 6-bit index to get its ASCII code */
	const __m256i offsets = _mm256_setr_epi8('a' - 26, '0' - 52, '0' - 52, '0' - 52,
											 '0' - 52, '0' - 52, '0' - 52, '0' - 52,
											 '0' - 52, '0' - 52, '0' - 52, '+' - 62,
											 '/' - 63, 'A', 0, 0,
											 'a' - 26, '0' - 52, '0' - 52, '0' - 52,
											 '0' - 52, '0' - 52, '0' - 52, '0' - 52,
											 '0' - 52, '0' - 52, '0' - 52, '+' - 62,
											 '/' - 63, 'A', 0, 0);
	__m256i		v;
	__m256i		hi;
	__m256i		lo;
	__m256i		cls;

	v = _mm256_shuffle_epi8(in, shuffle);
	/* indices 0 and 2 of each lane: shift right by 10 and 6 via a high multiply */
	hi = _mm256_mulhi_epu16(_mm256_and_si256(v, _mm256_set1_epi32(0x0FC0FC00)),
							_mm256_set1_epi32(0x04000040));
	/* indices 1 and 3: shift left by 4 and 8 via a low multiply */
	lo = _mm256_mullo_epi16(_mm256_and_si256(v, _mm256_set1_epi32(0x003F03F0)),
							_mm256_set1_epi32(0x01000010));
	v = _mm256_or_si256(hi, lo);

	/* class: 0 for 26..51, 1..12 for 52..63, 13 for 0..25 */
	cls = _mm256_subs_epu8(v, _mm256_set1_epi8(51));
	cls = _mm256_or_si256(cls, _mm256_and_si256(_mm256_cmpgt_epi8(_mm256_set1_epi8(26), v),
												_mm256_set1_epi8(13)));
	return _mm256_add_epi8(v, _mm256_shuffle_epi8(offsets, cls));
}

__attribute__((target("avx2")))
static size_t
cs_base64_encode_avx2(const unsigned char *src, size_t n, char *dst)
{
	size_t		i = 0;
	char	   *out = dst;

	if (n >= 28)
	{
		/* first block: no byte before src to borrow, so shift the low lane instead */
		__m256i		in = _mm256_inserti128_si256(
			_mm256_castsi128_si256(_mm_slli_si128(_mm_loadu_si128((const __m128i *) src), 4)),
			_mm_loadu_si128((const __m128i *) (src + 12)), 1);

		_mm256_storeu_si256((__m256i *) out, cs_b64_avx2_block(in));
		i = 24;
		out += 32;
		/* two independent blocks per iteration keep both shuffle ports busy */
		for (; i + 52 <= n; i += 48, out += 64)
		{
			__m256i		a = _mm256_loadu_si256((const __m256i *) (src + i - 4));
			__m256i		b = _mm256_loadu_si256((const __m256i *) (src + i + 20));

			_mm256_storeu_si256((__m256i *) out, cs_b64_avx2_block(a));
			_mm256_storeu_si256((__m256i *) (out + 32), cs_b64_avx2_block(b));
		}
		for (; i + 28 <= n; i += 24, out += 32)
			_mm256_storeu_si256((__m256i *) out,
								cs_b64_avx2_block(_mm256_loadu_si256((const __m256i *) (src + i - 4))));
	}
	cs_base64_encode_scalar(src + i, n - i, out);
	return cs_base64_len(n);
}

/*
 * AVX-512 VBMI on 256-bit registers: a byte permute gathers each group as
 * [b1 b0 b2 b1], one multishift pulls the four 6-bit fields into bytes, a two-table
 * permute looks them up in the alphabet. 24 bytes -> 32 characters per step with
 * three instructions; ymm width avoids the clock penalty some CPUs apply to zmm code.
 */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi")))
static inline __m256i
cs_b64_vbmi_block(__m256i in, __m256i gather, __m256i alpha_lo, __m256i alpha_hi)
{
	/* bit offsets of the four fields in [b1 b0 b2 b1], for both groups of a qword */
	const __m256i shifts = _mm256_set1_epi64x(0x3036242a1016040aLL);
	__m256i		idx;

	idx = _mm256_multishift_epi64_epi8(shifts, _mm256_permutexvar_epi8(gather, in));
	/* a 64-entry lookup over two 32-byte tables; bits 6..7 of each index are ignored */
	return _mm256_permutex2var_epi8(alpha_lo, idx, alpha_hi);
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi")))
static size_t
cs_base64_encode_avx512vbmi(const unsigned char *src, size_t n, char *dst)
{
	const __m256i gather = _mm256_setr_epi32(0x01020001, 0x04050304, 0x07080607, 0x0a0b090a,
											 0x0d0e0c0d, 0x10110f10, 0x13141213, 0x16171516);
	const __m256i alpha_lo = _mm256_loadu_si256((const __m256i *) cs_b64_alphabet);
	const __m256i alpha_hi = _mm256_loadu_si256((const __m256i *) (cs_b64_alphabet + 32));
	size_t		i = 0;
	char	   *out = dst;

	for (; i + 56 <= n; i += 48, out += 64)
	{
		__m256i		a = _mm256_loadu_si256((const __m256i *) (src + i));
		__m256i		b = _mm256_loadu_si256((const __m256i *) (src + i + 24));

		_mm256_storeu_si256((__m256i *) out, cs_b64_vbmi_block(a, gather, alpha_lo, alpha_hi));
		_mm256_storeu_si256((__m256i *) (out + 32), cs_b64_vbmi_block(b, gather, alpha_lo, alpha_hi));
	}
	/* the last blocks: a masked load reads exactly 24 bytes */
	for (; i + 24 <= n; i += 24, out += 32)
		_mm256_storeu_si256((__m256i *) out,
							cs_b64_vbmi_block(_mm256_maskz_loadu_epi8(0xffffff, src + i),
											  gather, alpha_lo, alpha_hi));
	cs_base64_encode_scalar(src + i, n - i, out);
	return cs_base64_len(n);
}

#endif							/* CS_HAVE_AVX2 */

static size_t cs_base64_resolve(const unsigned char *src, size_t n, char *dst);

static _Atomic(cs_base64_fn) cs_b64_impl = cs_base64_resolve;

cs_base64_fn
cs_base64_encoder(const char *impl)
{
	if (strcmp(impl, "scalar") == 0)
		return cs_base64_encode_scalar;
#ifdef CS_HAVE_AVX2
	if (strcmp(impl, "avx2") == 0 && __builtin_cpu_supports("avx2"))
		return cs_base64_encode_avx2;
	if (strcmp(impl, "avx512vbmi") == 0 && __builtin_cpu_supports("avx512vbmi") &&
		__builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
		return cs_base64_encode_avx512vbmi;
#endif
	return NULL;
}

/* The fastest encoder this CPU runs, unless CHROMA_SYNC_BASE64 names a slower one. */
static cs_base64_fn
cs_base64_choose(void)
{
	static const char *const by_speed[] = {"avx512vbmi", "avx2", "scalar"};
	const char *force = getenv("CHROMA_SYNC_BASE64");
	size_t		i;
	size_t		start = 0;

	for (i = 0; force != NULL && i < sizeof(by_speed) / sizeof(by_speed[0]); i++)
		if (strcmp(force, by_speed[i]) == 0)
			start = i;
	for (i = start; i < sizeof(by_speed) / sizeof(by_speed[0]); i++)
	{
		cs_base64_fn fn = cs_base64_encoder(by_speed[i]);

		if (fn != NULL)
			return fn;
	}
	return cs_base64_encode_scalar;
}

/* First call only: pick the implementation, then forward to it. */
static size_t
cs_base64_resolve(const unsigned char *src, size_t n, char *dst)
{
	cs_base64_fn fn = cs_base64_choose();

	atomic_store_explicit(&cs_b64_impl, fn, memory_order_relaxed);
	return fn(src, n, dst);
}

size_t
cs_base64_encode(const unsigned char *src, size_t n, char *dst)
{
	return atomic_load_explicit(&cs_b64_impl, memory_order_relaxed) (src, n, dst);
}

const char *
cs_base64_impl(void)
{
	cs_base64_fn fn = atomic_load_explicit(&cs_b64_impl, memory_order_relaxed);

	if (fn == cs_base64_resolve)
	{
		fn = cs_base64_choose();
		atomic_store_explicit(&cs_b64_impl, fn, memory_order_relaxed);
	}
#ifdef CS_HAVE_AVX2
	if (fn == cs_base64_encode_avx512vbmi)
		return "avx512vbmi";
	if (fn == cs_base64_encode_avx2)
		return "avx2";
#endif
	return "scalar";
}
