/*
 * wagent.h: the C kit for wagent operations (ABI v1, hostabi/ABI.md).
 *
 * One header, no allocator, no libc beyond memcpy/memset/memcmp/strlen
 * (wasi-libc's, which import nothing). Include it in the one .c file of
 * an op; it defines the ABI marker export, and WAGENT_ON defines a hook's
 * handler:
 *
 *     #include "wagent.h"
 *
 *     static int on_command(const wg_view *v) {
 *         wg_reply(WG_S("pong"));
 *         return WG_OK;
 *     }
 *     WAGENT_ON(command, on_command)
 *
 * Build (Debian: clang-14 lld-14 wasi-libc), then embed the manifest:
 *
 *     clang-14 --target=wasm32-wasi -Oz -msimd128 -mbulk-memory \
 *         -mexec-model=reactor -nodefaultlibs -Wl,--strip-debug -o op.wasm op.c -lc
 *     go run ./guests/cmd/wagent-build -manifest op.manifest.json -o op.wasm op.wasm
 *
 * Memory. Everything a call reads (the view, messages, notes, decoded
 * strings) and writes (the effects) lives in an arena that starts at
 * __heap_base and is reset when the next call starts: nothing survives a
 * call, which is what the ABI asks of instances anyway (durable memory is
 * notes). The arena grows the wasm memory as it needs; past the op's
 * memory limit the call traps and the host records a memory fault.
 *
 * -msimd128 lets the reader scan strings 16 bytes at a time, and
 * -mbulk-memory copies with memory.copy (both are wasm 2.0, which the
 * host takes); without them the kit works the same, a byte at a time.
 *
 * Strings. A wg_str is a pointer and a length, not NUL-terminated. Raw
 * JSON (a config, a call's arguments, a member of the view) is a wg_str
 * too; wg_json_field, wg_json_next and wg_json_string read it. Strings
 * the kit decodes are UTF-8 with the JSON escapes undone.
 *
 * Answers. The effect functions (wg_decide, wg_steer, wg_set_note, ...)
 * append to the call's answer, which the kit hands to the host in one
 * effects call when the handler returns WG_OK. A handler that returns
 * wg_fail("why") fails the call: the host records an op fault of kind
 * error with that message, and nothing of the answer is applied.
 */
#ifndef WAGENT_H
#define WAGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Every function of the kit is static: an op uses the ones it needs. */
#define WG__FN static __attribute__((unused))

/* ---- The host imports (module "wagent"; ABI.md §3) ---------------------- */

#define WG__IMPORT(name) __attribute__((import_module("wagent"), import_name(name)))
WG__IMPORT("view") int32_t wg__host_view(void *buf, int32_t cap);
WG__IMPORT("message") int32_t wg__host_message(int32_t index, void *buf, int32_t cap);
WG__IMPORT("note") int32_t wg__host_note(const void *key, int32_t key_len, void *buf, int32_t cap);
WG__IMPORT("effects") int32_t wg__host_effects(const void *ptr, int32_t len);
WG__IMPORT("log") int32_t wg__host_log(int32_t level, const void *ptr, int32_t len);

/* Status codes a handler returns, and log levels. */
enum { WG_OK = 0, WG_ERROR = 1 };
enum { WG_DEBUG = 0, WG_INFO = 1, WG_WARN = 2, WG_LOG_ERROR = 3 };

/* The ABI marker: its name tells the host this module speaks ABI v1. */
__attribute__((export_name("wagent_abi_v1"))) void wagent_abi_v1(void) {}

/* ---- Strings ------------------------------------------------------------ */

typedef struct {
	const char *p;
	size_t n;
} wg_str;

/* WG_S makes a wg_str of a string literal. */
#define WG_S(lit) ((wg_str){(lit), sizeof(lit) - 1})

WG__FN inline wg_str wg_cstr(const char *s) { return (wg_str){s, s ? strlen(s) : 0}; }
WG__FN inline bool wg_eq(wg_str a, wg_str b) { return a.n == b.n && (a.n == 0 || memcmp(a.p, b.p, a.n) == 0); }
WG__FN inline bool wg_contains_byte(wg_str s, char c) { return s.n > 0 && memchr(s.p, c, s.n) != NULL; }

/* ---- The arena ---------------------------------------------------------- */

extern unsigned char __heap_base;
WG__FN uintptr_t wg__top, wg__end;

/* wg_alloc returns n bytes of the call's arena, 8-aligned; it traps when
 * the memory cannot grow. */
WG__FN void *wg_alloc(size_t n) {
	uintptr_t p = (wg__top + 7) & ~(uintptr_t)7;
	if (p + n > wg__end) {
		size_t need = p + n - wg__end;
		size_t pages = (need + 65535) / 65536;
		if (__builtin_wasm_memory_grow(0, pages) == (size_t)-1)
			__builtin_trap(); /* over the op's memory limit: a memory fault */
		wg__end += pages * 65536;
	}
	wg__top = p + n;
	return (void *)p;
}

WG__FN void wg__reset(void) {
	wg__top = (uintptr_t)&__heap_base;
	wg__end = __builtin_wasm_memory_size(0) * 65536;
}

/* wg_concat returns a and b joined, in the arena. */
WG__FN wg_str wg_concat(wg_str a, wg_str b) {
	char *p = wg_alloc(a.n + b.n + 1);
	memcpy(p, a.p, a.n);
	memcpy(p + a.n, b.p, b.n);
	p[a.n + b.n] = 0;
	return (wg_str){p, a.n + b.n};
}

/* wg_itoa returns n in decimal, in the arena. */
WG__FN wg_str wg_itoa(int64_t n) {
	char tmp[24];
	size_t i = sizeof tmp;
	uint64_t u = n < 0 ? -(uint64_t)n : (uint64_t)n;
	do {
		tmp[--i] = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (n < 0)
		tmp[--i] = '-';
	return wg_concat((wg_str){tmp + i, sizeof tmp - i}, (wg_str){"", 0});
}

/* ---- Reading JSON ------------------------------------------------------- */

/* The reader skips values as a parser would, so keys it does not know
 * (a later ABI minor may add some) are passed over whatever they hold.
 *
 * Speed. A wasm function call is dear (the host's deadline checks run at
 * every entry), so the hot paths (white space, strings, the writer) are
 * inlined, and skipping a value is one loop however deep it is, not one
 * call per token. The view is decoded in one pass when the call starts. */

/* WG__INLINE: always inlined, whatever the optimisation level. */
#define WG__INLINE static inline __attribute__((always_inline, unused))

/* WG__MAX_DEPTH: how deep a value may nest; deeper is malformed. */
#define WG__MAX_DEPTH 512

WG__INLINE bool wg__isws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

WG__INLINE const char *wg__ws(const char *p, const char *e) {
	while (p < e && (unsigned char)*p <= ' ' && wg__isws(*p))
		p++;
	return p;
}

/* With wasm SIMD (clang -msimd128), strings are scanned 16 bytes at a
 * time; without it, a byte at a time. Either way the kit reads only
 * inside [p, e). */
#ifdef __wasm_simd128__
#include <wasm_simd128.h>
#endif

/* wg__find_qb returns the first '"' or '\\' in [p, e), or e (or p, if p
 * is past e). */
WG__INLINE const char *wg__find_qb(const char *p, const char *e) {
#ifdef __wasm_simd128__
	while (e - p >= 16) {
		v128_t x = wasm_v128_load(p);
		uint32_t m = (uint32_t)wasm_i8x16_bitmask(
			wasm_v128_or(wasm_i8x16_eq(x, wasm_i8x16_splat('"')), wasm_i8x16_eq(x, wasm_i8x16_splat('\\'))));
		if (m)
			return p + __builtin_ctz(m);
		p += 16;
	}
#endif
	while (p < e && *p != '"' && *p != '\\')
		p++;
	return p;
}

/* wg__find_esc returns the first byte in [p, e) a JSON string must
 * escape (a control byte, '"' or '\\'), or e. */
WG__INLINE const unsigned char *wg__find_esc(const unsigned char *p, const unsigned char *e) {
#ifdef __wasm_simd128__
	while (e - p >= 16) {
		v128_t x = wasm_v128_load(p);
		v128_t m = wasm_v128_or(wasm_u8x16_lt(x, wasm_u8x16_splat(0x20)),
			wasm_v128_or(wasm_i8x16_eq(x, wasm_i8x16_splat('"')), wasm_i8x16_eq(x, wasm_i8x16_splat('\\'))));
		uint32_t b = (uint32_t)wasm_i8x16_bitmask(m);
		if (b)
			return p + __builtin_ctz(b);
		p += 16;
	}
#endif
	while (p < e && *p >= 0x20 && *p != '"' && *p != '\\')
		p++;
	return p;
}

/* wg__str_end returns the end of the string whose opening quote is at p,
 * or NULL when it does not end before e. An escape's backslash and the
 * byte after it are passed over. */
WG__INLINE const char *wg__str_end(const char *p, const char *e) {
	for (p++;;) {
		p = wg__find_qb(p, e);
		if (p >= e)
			return NULL;
		if (*p == '"')
			return p + 1;
		p += 2;
	}
}

WG__INLINE bool wg__delim(char c) { return c == ',' || c == '}' || c == ']' || wg__isws(c); }

/* wg__skip returns the end of the value at p, or NULL if it is malformed:
 * a string, an object or array whose members are values (an object's keys
 * are values too, followed by ':'), nested at most WG__MAX_DEPTH deep
 * (depth is that of the value at p), or a run of bytes up to a delimiter
 * (a number, true, false or null). It is one loop: st holds, for each open
 * container, whether it is an object (1) and whether its key was just read
 * (2). */
WG__FN const char *wg__skip(const char *p, const char *e, int depth) {
	unsigned char st[WG__MAX_DEPTH + 1];
	int d = 0; /* open containers */
	for (;;) {
		/* A value (or an object's key) at depth + d. */
		p = wg__ws(p, e);
		if (p >= e || depth + d > WG__MAX_DEPTH)
			return NULL;
		char c = *p;
		if (c == '"') {
			if (!(p = wg__str_end(p, e)))
				return NULL;
		} else if (c == '{' || c == '[') {
			char close = c == '{' ? '}' : ']';
			p = wg__ws(p + 1, e);
			if (p < e && *p == close) {
				p++;
			} else {
				st[d++] = c == '{';
				continue;
			}
		} else {
			const char *s = p;
			while (p < e && !wg__delim(*p))
				p++;
			if (p == s)
				return NULL;
		}
		/* A value ended: close what it ends. */
		for (;;) {
			if (d == 0)
				return p;
			unsigned char t = st[d - 1];
			p = wg__ws(p, e);
			if (t == 1) { /* an object's key was read */
				if (p >= e || *p != ':')
					return NULL;
				st[d - 1] = 3;
				p++;
				break;
			}
			if (p < e && *p == ',') {
				if (t == 3)
					st[d - 1] = 1;
				p++;
				break;
			}
			if (p < e && *p == (t ? '}' : ']')) {
				p++;
				d--;
				continue;
			}
			return NULL;
		}
	}
}

/* wg__skip_value is wg__skip with a string's end found inline. */
WG__INLINE const char *wg__skip_value(const char *p, const char *e, int depth) {
	p = wg__ws(p, e);
	if (p < e && *p == '"' && depth <= WG__MAX_DEPTH)
		return wg__str_end(p, e);
	return wg__skip(p, e, depth);
}

/* An iterator over an array's items or an object's members. */
typedef struct {
	const char *p, *e;
	bool obj, ok;
	/* The kit's: for wg_calls, the calls decoded with the view. */
	const void *wg__calls;
	size_t wg__i, wg__n;
	const char *wg__at;
} wg_iter;

/* wg_json_items starts iterating over an array (or an object's members);
 * anything else iterates over nothing. */
WG__FN wg_iter wg_json_items(wg_str raw) {
	const char *p = wg__ws(raw.p, raw.p + raw.n), *e = raw.p + raw.n;
	wg_iter it = {p, e, false, false, NULL, 0, 0, NULL};
	if (p < e && (*p == '[' || *p == '{')) {
		it.obj = *p == '{';
		it.p = p + 1;
		it.ok = true;
	}
	return it;
}

/* wg__next_start moves the iterator to its next item and returns where it
 * starts, or NULL at the end. */
WG__INLINE const char *wg__next_start(wg_iter *it) {
	if (!it->ok)
		return NULL;
	const char *p = wg__ws(it->p, it->e);
	if (p < it->e && *p == ',')
		p = wg__ws(p + 1, it->e);
	if (p >= it->e || *p == ']' || *p == '}') {
		it->ok = false;
		return NULL;
	}
	return p;
}

/* wg__member reads an object member's key at p (any value, as the reader
 * has it) and its ':'; it returns where the value starts, or NULL. */
WG__INLINE const char *wg__member(const char *p, const char *e, int depth, wg_str *key) {
	const char *k = p;
	p = wg__skip_value(p, e, depth);
	if (!p)
		return NULL;
	*key = (wg_str){k, (size_t)(p - k)};
	p = wg__ws(p, e);
	if (p >= e || *p != ':')
		return NULL;
	return wg__ws(p + 1, e);
}

/* wg__next is wg_json_next inlined. */
WG__INLINE bool wg__next(wg_iter *it, wg_str *key, wg_str *val) {
	const char *p = wg__next_start(it);
	if (!p)
		return false;
	if (it->obj) {
		wg_str k;
		p = wg__member(p, it->e, 0, &k);
		if (!p) {
			it->ok = false;
			return false;
		}
		if (key)
			*key = k;
	}
	const char *v = p;
	p = wg__skip_value(p, it->e, 0);
	if (!p) {
		it->ok = false;
		return false;
	}
	*val = (wg_str){v, (size_t)(p - v)};
	it->p = p;
	return true;
}

/* wg_json_next yields the next item (for an object: the next member, its
 * raw key in *key when key is not NULL). */
WG__FN bool wg_json_next(wg_iter *it, wg_str *key, wg_str *val) { return wg__next(it, key, val); }

WG__FN void wg__utf8(char **o, uint32_t r) {
	char *q = *o;
	if (r < 0x80)
		*q++ = (char)r;
	else if (r < 0x800)
		*q++ = (char)(0xC0 | r >> 6), *q++ = (char)(0x80 | (r & 0x3F));
	else if (r < 0x10000)
		*q++ = (char)(0xE0 | r >> 12), *q++ = (char)(0x80 | (r >> 6 & 0x3F)), *q++ = (char)(0x80 | (r & 0x3F));
	else
		*q++ = (char)(0xF0 | r >> 18), *q++ = (char)(0x80 | (r >> 12 & 0x3F)), *q++ = (char)(0x80 | (r >> 6 & 0x3F)), *q++ = (char)(0x80 | (r & 0x3F));
	*o = q;
}

WG__FN int wg__hex4(const char *p) {
	int v = 0;
	for (int i = 0; i < 4; i++) {
		char c = p[i];
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= c - '0';
		else if (c >= 'a' && c <= 'f')
			v |= c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v |= c - 'A' + 10;
		else
			return -1;
	}
	return v;
}

/* wg__unescape decodes the string body at s (after its opening quote),
 * which has escapes, into the arena. */
WG__FN bool wg__unescape(const char *s, const char *e, wg_str *out) {
	char *o = wg_alloc((size_t)(e - s) + 1), *start = o;
	const char *p;
	for (p = s; p < e && *p != '"'; p++) {
		if (*p != '\\') {
			*o++ = *p;
			continue;
		}
		if (++p >= e)
			return false;
		switch (*p) {
		case 'n': *o++ = '\n'; break;
		case 't': *o++ = '\t'; break;
		case 'r': *o++ = '\r'; break;
		case 'b': *o++ = '\b'; break;
		case 'f': *o++ = '\f'; break;
		case 'u': {
			if (e - p < 5)
				return false;
			int r = wg__hex4(p + 1);
			if (r < 0)
				return false;
			p += 4;
			if (r >= 0xD800 && r < 0xDC00 && e - p >= 7 && p[1] == '\\' && p[2] == 'u') {
				int lo = wg__hex4(p + 3);
				if (lo >= 0xDC00 && lo < 0xE000) {
					r = 0x10000 + ((r - 0xD800) << 10) + (lo - 0xDC00);
					p += 6;
				} else {
					r = 0xFFFD;
				}
			} else if (r >= 0xD800 && r < 0xE000) {
				r = 0xFFFD;
			}
			wg__utf8(&o, (uint32_t)r);
			break;
		}
		default: *o++ = *p; /* " \ / */
		}
	}
	if (p >= e)
		return false;
	*o = 0;
	*out = (wg_str){start, (size_t)(o - start)};
	return true;
}

/* wg__string is wg_json_string inlined: a string without escapes is
 * returned in place. */
WG__INLINE bool wg__string(wg_str raw, wg_str *out) {
	const char *p = wg__ws(raw.p, raw.p + raw.n), *e = raw.p + raw.n;
	if (p < e && *p == '"') {
		const char *s = ++p;
		p = wg__find_qb(p, e);
		if (p < e && *p == '"') {
			*out = (wg_str){s, (size_t)(p - s)};
			return true;
		}
		return wg__unescape(s, e, out);
	}
	if (e - p >= 4 && p[0] == 'n' && p[1] == 'u' && p[2] == 'l' && p[3] == 'l') {
		*out = (wg_str){"", 0};
		return true;
	}
	return false;
}

/* wg_json_string decodes a raw JSON string (null gives ""); a string
 * without escapes is returned in place, one with escapes is decoded into
 * the arena. It reports false when raw is not a string. */
WG__FN bool wg_json_string(wg_str raw, wg_str *out) { return wg__string(raw, out); }

WG__INLINE size_t wg__strlen(const char *s) {
	size_t n = 0;
	while (s[n])
		n++;
	return n;
}

/* wg__is reports whether s is the literal lit, compared inline. */
#define wg__is(s, lit) ((s).n == sizeof(lit) - 1 && wg__same((s).p, lit, sizeof(lit) - 1))
WG__INLINE bool wg__same(const char *a, const char *b, size_t n) {
	for (size_t i = 0; i < n; i++)
		if (a[i] != b[i])
			return false;
	return true;
}

/* wg__key_is decodes the raw key k and reports whether it is lit; a key
 * without escapes is compared in place. */
#define wg__key_is(k, lit) wg__key_eq(k, lit, sizeof(lit) - 1)
WG__INLINE bool wg__key_eq(wg_str dk, const char *lit, size_t n) { return dk.n == n && wg__same(dk.p, lit, n); }

/* The members of the last object of the view wg_json_field read, so
 * that asking it for another key of the same object (a config's, say)
 * does not read the object again. Only objects inside the view document
 * (which no one writes) are remembered; it is reset when a call starts. */
struct wg__field {
	wg_str key, val;
	bool named; /* key is a string (decoded in key) */
};
WG__FN struct {
	const char *doc, *doc_end; /* the view document */
	const char *p;
	size_t n;
	struct wg__field *f;
	size_t count, cap;
} wg__fields;

/* wg_json_field finds key among the members of the object obj (the last
 * one, if it is there twice) and sets *val to its raw value. It reports
 * false when obj is not an object or has no such key. */
WG__FN bool wg_json_field(wg_str obj, const char *key, wg_str *val) {
	size_t want = wg__strlen(key);
	wg_str k, v, dk;
	if (!(obj.p && obj.p >= wg__fields.doc && obj.p < wg__fields.doc_end && obj.n <= (size_t)(wg__fields.doc_end - obj.p))) {
		wg_iter it = wg_json_items(obj);
		if (!it.obj)
			return false;
		bool found = false;
		while (wg__next(&it, &k, &v)) {
			if (wg__string(k, &dk) && dk.n == want && wg__same(dk.p, key, want)) {
				*val = v;
				found = true;
			}
		}
		return found;
	}
	if (obj.p != wg__fields.p || obj.n != wg__fields.n) {
		wg_iter it = wg_json_items(obj);
		if (!it.obj)
			return false;
		size_t n = 0;
		while (wg__next(&it, &k, &v)) {
			if (n == wg__fields.cap) { /* a larger table (it is reused) */
				size_t cap = wg__fields.cap ? 2 * wg__fields.cap : 16;
				struct wg__field *f = wg_alloc(cap * sizeof *f);
				if (n)
					memcpy(f, wg__fields.f, n * sizeof *f);
				wg__fields.f = f, wg__fields.cap = cap;
			}
			struct wg__field *f = &wg__fields.f[n++];
			f->named = wg__string(k, &f->key);
			f->val = v;
		}
		wg__fields.p = obj.p, wg__fields.n = obj.n, wg__fields.count = n;
	}
	for (size_t i = wg__fields.count; i-- > 0;) {
		const struct wg__field *f = &wg__fields.f[i];
		if (f->named && f->key.n == want && wg__same(f->key.p, key, want)) {
			*val = f->val;
			return true;
		}
	}
	return false;
}

/* wg_json_int decodes a JSON integer. */
WG__FN bool wg_json_int(wg_str raw, int64_t *out) {
	const char *p = wg__ws(raw.p, raw.p + raw.n), *e = raw.p + raw.n;
	bool neg = p < e && *p == '-';
	if (neg)
		p++;
	if (p >= e || *p < '0' || *p > '9')
		return false;
	uint64_t v = 0;
	for (; p < e && *p >= '0' && *p <= '9'; p++)
		v = v * 10 + (uint64_t)(*p - '0');
	*out = neg ? -(int64_t)v : (int64_t)v;
	return true;
}

/* wg_json_bool decodes true or false. */
WG__FN bool wg_json_bool(wg_str raw, bool *out) {
	const char *p = wg__ws(raw.p, raw.p + raw.n), *e = raw.p + raw.n;
	if (e - p >= 4 && memcmp(p, "true", 4) == 0)
		return *out = true, true;
	if (e - p >= 5 && memcmp(p, "false", 5) == 0)
		return *out = false, true;
	return false;
}

/* wg_json_has_string reports whether the raw JSON array list holds the
 * string s (a config's allow list, say). */
WG__FN bool wg_json_has_string(wg_str list, wg_str s) {
	wg_iter it = wg_json_items(list);
	wg_str item, d;
	while (wg__next(&it, NULL, &item))
		if (wg__string(item, &d) && d.n == s.n && wg__same(d.p, s.p, s.n))
			return true;
	return false;
}

/* wg_json_is_strings reports whether raw is an array of strings (or
 * null). */
WG__FN bool wg_json_is_strings(wg_str raw) {
	const char *p = wg__ws(raw.p, raw.p + raw.n), *e = raw.p + raw.n;
	if (e - p >= 4 && memcmp(p, "null", 4) == 0)
		return true;
	if (p >= e || *p != '[')
		return false;
	wg_iter it = wg_json_items(raw);
	wg_str item, d;
	const char *last = it.p;
	while (wg__next(&it, NULL, &item)) {
		if (!wg__string(item, &d))
			return false;
		last = it.p;
	}
	p = wg__ws(last, e);
	if (p < e && *p == ',')
		return false; /* a trailing comma, or an item that did not parse */
	return p < e && *p == ']';
}

/* ---- The view ----------------------------------------------------------- */

/* A pending call of the tool view. */
typedef struct {
	wg_str id, name, arguments, owner, server, decision, annotations;
	bool requested, started;
} wg_call;

/* wg_view is the call's view (ABI.md §4). The strings are decoded; the
 * objects (config, tool, ...) are raw JSON, empty when absent. The wg__
 * members are the kit's: the tool view's calls (decoded) and run, noted
 * as the view was decoded, for the tool it was decoded with. */
typedef struct {
	wg_str hook, session, op;
	int64_t turn, step, messages;
	wg_str config;
	wg_str prompt, tool, failure, stop, command, compact;
	wg_str raw; /* the whole document */
	wg_str wg__tool, wg__calls, wg__run;
	bool wg__has_calls, wg__has_run;
	const void *wg__dcalls; /* struct wg__dcall[wg__ndcalls], or NULL */
	size_t wg__ndcalls;
} wg_view;

/* A call decoded with the view, and where it ends in the document. */
struct wg__dcall {
	wg_call c;
	const char *end;
};

/* wg__call_field decodes one member of a call. */
WG__INLINE void wg__call_field(wg_call *c, wg_str key, wg_str val) {
	switch (key.n) {
	case 2:
		if (wg__is(key, "id"))
			wg__string(val, &c->id);
		break;
	case 4:
		if (wg__is(key, "name"))
			wg__string(val, &c->name);
		break;
	case 5:
		if (wg__is(key, "owner"))
			wg__string(val, &c->owner);
		break;
	case 6:
		if (wg__is(key, "server"))
			wg__string(val, &c->server);
		break;
	case 7:
		if (wg__is(key, "started"))
			wg_json_bool(val, &c->started);
		break;
	case 8:
		if (wg__is(key, "decision"))
			wg__string(val, &c->decision);
		break;
	case 9:
		if (wg__is(key, "arguments"))
			c->arguments = val;
		else if (wg__is(key, "requested"))
			wg_json_bool(val, &c->requested);
		break;
	case 11:
		if (wg__is(key, "annotations"))
			c->annotations = val;
		break;
	}
}

/* wg__call_at decodes the call at p (a value at depth) in one pass: its
 * members are skipped as wg__skip would skip the whole call, and decoded
 * as they are (a member whose key is not a string is passed over). An item
 * that is not an object is a call with nothing set. It returns the call's
 * end, or NULL when it does not parse. */
WG__FN const char *wg__call_at(const char *p, const char *e, int depth, wg_call *t) {
	wg_str k, key, val;
	memset(t, 0, sizeof *t);
	p = wg__ws(p, e);
	if (p >= e || depth > WG__MAX_DEPTH)
		return NULL;
	if (*p != '{')
		return wg__skip(p, e, depth);
	p = wg__ws(p + 1, e);
	if (p < e && *p == '}')
		return p + 1;
	for (;;) {
		if (!(p = wg__member(p, e, depth + 1, &k)))
			return NULL;
		const char *s = p;
		if (!(p = wg__skip_value(p, e, depth + 1)))
			return NULL;
		val = (wg_str){s, (size_t)(p - s)};
		if (wg__string(k, &key))
			wg__call_field(t, key, val);
		p = wg__ws(p, e);
		if (p < e && *p == ',') {
			p++;
			continue;
		}
		if (p < e && *p == '}')
			return p + 1;
		return NULL;
	}
}

/* wg__calls_at decodes the calls array at p (a value at depth 1) into the
 * arena; it returns its end, or NULL when it does not parse. */
WG__FN const char *wg__calls_at(const char *p, const char *e, struct wg__dcall **out, size_t *count) {
	size_t n = 0, cap = 0;
	struct wg__dcall *a = NULL;
	p = wg__ws(p + 1, e);
	if (p < e && *p == ']') {
		*out = NULL, *count = 0;
		return p + 1;
	}
	for (;;) {
		if (n == cap) {
			size_t c2 = cap ? 2 * cap : 8;
			struct wg__dcall *b = wg_alloc(c2 * sizeof *b);
			if (n)
				memcpy(b, a, n * sizeof *a);
			a = b, cap = c2;
		}
		if (!(p = wg__call_at(p, e, 2, &a[n].c)))
			return NULL;
		a[n++].end = p;
		p = wg__ws(p, e);
		if (p < e && *p == ',') {
			p++;
			continue;
		}
		if (p < e && *p == ']') {
			*out = a, *count = n;
			return p + 1;
		}
		return NULL;
	}
}

/* wg__tool_members reads the tool object at p (a value at depth 0) in one
 * pass, as wg__skip would, noting its calls (decoded when they are an
 * array) and run, the last of each; it returns the object's end, or NULL
 * if it is malformed (and then notes nothing). */
WG__FN const char *wg__tool_members(const char *p, const char *e, wg_view *v) {
	wg_str calls = {0}, run = {0}, k, dk;
	bool has_calls = false, has_run = false;
	struct wg__dcall *dc = NULL;
	size_t ndc = 0;
	p = wg__ws(p + 1, e);
	if (p < e && *p == '}') {
		p++;
	} else {
		for (;;) {
			p = wg__member(p, e, 1, &k);
			if (!p)
				return NULL;
			const char *s = p;
			bool named = wg__string(k, &dk);
			bool is_calls = named && wg__is(dk, "calls"), is_run = named && wg__is(dk, "run");
			if (is_calls && p < e && *p == '[') {
				p = wg__calls_at(p, e, &dc, &ndc);
			} else {
				p = wg__skip_value(p, e, 1);
				if (is_calls)
					dc = NULL, ndc = 0;
			}
			if (!p)
				return NULL;
			if (is_calls)
				calls = (wg_str){s, (size_t)(p - s)}, has_calls = true;
			else if (is_run)
				run = (wg_str){s, (size_t)(p - s)}, has_run = true;
			p = wg__ws(p, e);
			if (p < e && *p == ',') {
				p++;
				continue;
			}
			if (p < e && *p == '}') {
				p++;
				break;
			}
			return NULL;
		}
	}
	v->wg__calls = calls, v->wg__run = run;
	v->wg__has_calls = has_calls, v->wg__has_run = has_run;
	v->wg__dcalls = dc, v->wg__ndcalls = ndc;
	return p;
}

/* wg__parse_view decodes the view in one pass: every member's value is
 * skipped once (the tool's members, the calls decoded, as they are
 * skipped), and the ones the kit knows are decoded. It refuses a document
 * that is not an object and a member whose key is not a string or whose
 * known value has the wrong type; a member that does not parse ends the
 * document. */
WG__FN bool wg__parse_view(wg_str doc, wg_view *v) {
	memset(v, 0, sizeof *v);
	v->raw = doc;
	wg_iter it = wg_json_items(doc);
	if (!it.obj)
		return false;
	const char *p, *e = it.e;
	while ((p = wg__next_start(&it))) {
		wg_str k, key, val;
		if (!(p = wg__member(p, e, 0, &k)))
			break;
		const char *s = p;
		bool tool = false;
		if (wg__is(k, "\"tool\"") && p < e && *p == '{') {
			wg_view keep = *v;
			p = wg__tool_members(p, e, v);
			if (!p) /* as it was: the last good tool's */
				*v = keep;
			tool = true;
		} else {
			p = wg__skip_value(p, e, 0);
		}
		if (!p)
			break;
		it.p = p;
		val = (wg_str){s, (size_t)(p - s)};
		if (!wg__string(k, &key))
			return false;
		bool ok = true;
		switch (key.n) {
		case 2:
			if (wg__is(key, "op"))
				ok = wg__string(val, &v->op);
			break;
		case 4:
			if (wg__is(key, "hook"))
				ok = wg__string(val, &v->hook);
			else if (wg__is(key, "turn"))
				ok = wg_json_int(val, &v->turn);
			else if (wg__is(key, "step"))
				ok = wg_json_int(val, &v->step);
			else if (wg__is(key, "tool")) {
				v->tool = val;
				v->wg__tool = tool ? val : (wg_str){0};
			} else if (wg__is(key, "stop"))
				v->stop = val;
			break;
		case 6:
			if (wg__is(key, "config"))
				v->config = val;
			else if (wg__is(key, "prompt"))
				v->prompt = val;
			break;
		case 7:
			if (wg__is(key, "session"))
				ok = wg__string(val, &v->session);
			else if (wg__is(key, "failure"))
				v->failure = val;
			else if (wg__is(key, "command"))
				v->command = val;
			else if (wg__is(key, "compact"))
				v->compact = val;
			break;
		case 8:
			if (wg__is(key, "messages"))
				ok = wg_json_int(val, &v->messages);
			break;
		}
		/* anything else: a key of a later minor, skipped */
		if (!ok)
			return false;
	}
	return true;
}

/* wg__tool_cached reports whether v's tool is the one the view was
 * decoded with, whose calls and run the kit noted. */
WG__INLINE bool wg__tool_cached(const wg_view *v) {
	return v->wg__tool.p && v->wg__tool.p == v->tool.p && v->wg__tool.n == v->tool.n;
}

/* wg_calls iterates over the tool view's pending calls; wg_next_call
 * decodes the next one. (For the view's own tool, the calls were decoded
 * with the view, and wg_next_call hands them out.) */
WG__FN wg_iter wg_calls(const wg_view *v) {
	wg_str calls = {0};
	bool cached = wg__tool_cached(v);
	if (cached) {
		if (v->wg__has_calls)
			calls = v->wg__calls;
	} else {
		wg_json_field(v->tool, "calls", &calls);
	}
	wg_iter it = wg_json_items(calls);
	if (cached && v->wg__dcalls && it.ok && !it.obj) {
		it.wg__calls = v->wg__dcalls;
		it.wg__n = v->wg__ndcalls;
		it.wg__at = it.p;
	}
	return it;
}

/* wg_next_call decodes the next call: a call that does not parse ends the
 * iteration; an item that is not an object is a call with nothing set. */
WG__FN bool wg_next_call(wg_iter *it, wg_call *c) {
	wg_str k, key, val;
	if (it->wg__calls && it->ok && it->p == it->wg__at) { /* decoded with the view */
		if (it->wg__i == it->wg__n) {
			it->ok = false;
			return false;
		}
		const struct wg__dcall *d = (const struct wg__dcall *)it->wg__calls + it->wg__i++;
		*c = d->c;
		it->p = it->wg__at = d->end;
		return true;
	}
	if (it->obj) { /* calls is an object: its members' values, as it was */
		if (!wg_json_next(it, NULL, &val))
			return false;
		memset(c, 0, sizeof *c);
		wg_iter f = wg_json_items(val);
		while (f.obj && wg_json_next(&f, &k, &val))
			if (wg__string(k, &key))
				wg__call_field(c, key, val);
		return true;
	}
	const char *p = wg__next_start(it);
	if (!p)
		return false;
	wg_call t;
	if (!(p = wg__call_at(p, it->e, 0, &t))) {
		it->ok = false;
		return false;
	}
	*c = t;
	it->p = p;
	return true;
}

/* wg_tool_run returns the call id the host asks the op to run (the tool
 * view's run), or an empty string. */
WG__FN wg_str wg_tool_run(const wg_view *v) {
	wg_str raw, s = {"", 0};
	if (wg__tool_cached(v) ? (raw = v->wg__run, v->wg__has_run) : wg_json_field(v->tool, "run", &raw))
		wg__string(raw, &s);
	return s;
}

/* wg_field_string decodes the string member key of a raw object ("" when
 * absent): wg_field_string(v->stop, "content"). */
WG__FN wg_str wg_field_string(wg_str obj, const char *key) {
	wg_str raw, s = {"", 0};
	if (wg_json_field(obj, key, &raw))
		wg_json_string(raw, &s);
	return s;
}

/* ---- Messages and notes, read on demand ----------------------------------- */

/* One conversation message (ABI.md §4). tool_calls is raw JSON. */
typedef struct {
	wg_str role, id, content, call_id, tool_calls;
	bool is_error;
} wg_message;

/* wg__read calls a host read with a buffer from the arena, and again with
 * a larger one when the first did not fit. */
WG__FN bool wg__read(int kind, int32_t index, wg_str key, wg_str *out) {
	int32_t cap = 4096;
	char *buf = wg_alloc((size_t)cap);
	for (int tries = 0; tries < 2; tries++) {
		int32_t n = kind == 0 ? wg__host_message(index, buf, cap) : wg__host_note(key.p, (int32_t)key.n, buf, cap);
		if (n < 0)
			return false;
		if (n <= cap) {
			*out = (wg_str){buf, (size_t)n};
			return true;
		}
		cap = n;
		buf = wg_alloc((size_t)cap);
	}
	return false;
}

/* wg_message_get reads message i (0 is the oldest; v->messages is the
 * count). It reports false when there is no such message. */
WG__FN bool wg_message_get(int64_t i, wg_message *m) {
	wg_str doc, k, val, key;
	if (i < 0 || i > INT32_MAX || !wg__read(0, (int32_t)i, (wg_str){0}, &doc))
		return false;
	memset(m, 0, sizeof *m);
	wg_iter it = wg_json_items(doc);
	if (!it.obj)
		return false;
	while (wg_json_next(&it, &k, &val)) {
		if (!wg__string(k, &key))
			return false;
		if (wg__is(key, "role"))
			wg__string(val, &m->role);
		else if (wg__is(key, "id"))
			wg__string(val, &m->id);
		else if (wg__is(key, "content"))
			wg__string(val, &m->content);
		else if (wg__is(key, "call_id"))
			wg__string(val, &m->call_id);
		else if (wg__is(key, "tool_calls"))
			m->tool_calls = val;
		else if (wg__is(key, "is_error"))
			wg_json_bool(val, &m->is_error);
	}
	return true;
}

/* wg_note reads the op's note key. It reports false when there is none. */
WG__FN bool wg_note(wg_str key, wg_str *value) { return wg__read(1, 0, key, value); }

/* wg_log writes a line to the host's diagnostic log (not an effect). */
WG__FN void wg_log(int32_t level, wg_str text) { wg__host_log(level, text.p, (int32_t)text.n); }

/* wg_fail logs why at the error level and returns WG_ERROR: return
 * wg_fail("...") from a handler to fail the call. */
WG__FN int wg_fail(const char *why) {
	wg_log(WG_LOG_ERROR, wg_cstr(why));
	return WG_ERROR;
}

/* ---- Writing effects ----------------------------------------------------- */

WG__FN struct {
	char *p;
	size_t n, cap;
	int count;
} wg__out;

/* wg__grow makes room for n more bytes of output. */
WG__FN void wg__grow(size_t n) {
	size_t cap = wg__out.cap * 2;
	if (cap < wg__out.n + n)
		cap = wg__out.n + n;
	if (cap < 1024)
		cap = 1024;
	char *p = wg_alloc(cap);
	if (wg__out.n)
		memcpy(p, wg__out.p, wg__out.n);
	wg__out.p = p;
	wg__out.cap = cap;
}

/* wg__room returns where n more bytes of output go (the caller adds n to
 * wg__out.n). */
WG__INLINE char *wg__room(size_t n) {
	if (n > wg__out.cap - wg__out.n)
		wg__grow(n);
	return wg__out.p + wg__out.n;
}

/* wg__copy copies n bytes; short runs (most of what the writer copies)
 * are copied inline rather than by a call of memcpy. */
WG__INLINE void wg__copy(char *dst, const char *s, size_t n) {
#ifdef __wasm_bulk_memory__
	__builtin_memcpy(dst, s, n); /* memory.copy */
#else
	if (n > 32) {
		memcpy(dst, s, n);
		return;
	}
	for (size_t i = 0; i < n; i++)
		dst[i] = s[i];
#endif
}

WG__INLINE void wg__put(const char *s, size_t n) {
	wg__copy(wg__room(n), s, n);
	wg__out.n += n;
}

WG__INLINE void wg__putc(char c) {
	*wg__room(1) = c;
	wg__out.n++;
}

/* wg__quote writes s as a JSON string: runs that need no escape are
 * copied whole. */
WG__FN void wg__quote(wg_str s) {
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s.p, *e = p + s.n;
	const unsigned char *q = wg__find_esc(p, e);
	if (s.n > SIZE_MAX - 2)
		__builtin_trap();
	if (q == e) { /* nothing to escape */
		char *o = wg__room(s.n + 2);
		o[0] = '"';
		wg__copy(o + 1, s.p, s.n);
		o[s.n + 1] = '"';
		wg__out.n += s.n + 2;
		return;
	}
	wg__putc('"');
	for (;;) {
		wg__put((const char *)p, (size_t)(q - p));
		if (q == e)
			break;
		unsigned char c = *q++;
		switch (c) {
		case '"': wg__put("\\\"", 2); break;
		case '\\': wg__put("\\\\", 2); break;
		case '\n': wg__put("\\n", 2); break;
		case '\t': wg__put("\\t", 2); break;
		case '\r': wg__put("\\r", 2); break;
		default: {
			char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
			wg__put(u, 6);
		}
		}
		p = q;
		q = wg__find_esc(p, e);
	}
	wg__putc('"');
}

/* A minimal JSON writer for an effect: wg_effect starts one with its
 * kind, the wg_put_* functions add members, wg_end closes it.
 *
 *     wg_effect("reply"); wg_put_str("text", WG_S("pong")); wg_end();
 */
WG__FN void wg_effect(const char *kind) {
	if (wg__out.count == 0)
		wg__put("[{\"kind\":", 9);
	else
		wg__put(",{\"kind\":", 9);
	wg__out.count++;
	wg__quote((wg_str){kind, wg__strlen(kind)});
}

WG__FN void wg__key(const char *key) {
	wg__putc(',');
	wg__quote((wg_str){key, wg__strlen(key)});
	wg__putc(':');
}

WG__FN void wg_put_str(const char *key, wg_str v) { wg__key(key), wg__quote(v); }
WG__FN void wg_put_bool(const char *key, bool v) { wg__key(key), v ? wg__put("true", 4) : wg__put("false", 5); }
WG__FN void wg_put_int(const char *key, int64_t v) {
	wg_str s = wg_itoa(v);
	wg__key(key);
	wg__put(s.p, s.n);
}
/* wg_put_raw adds a member whose value is JSON text as it is. */
WG__FN void wg_put_raw(const char *key, wg_str json) { wg__key(key), wg__put(json.p, json.n); }
WG__FN void wg_put_strs(const char *key, const wg_str *v, size_t n) {
	wg__key(key);
	wg__putc('[');
	for (size_t i = 0; i < n; i++) {
		if (i)
			wg__putc(',');
		wg__quote(v[i]);
	}
	wg__putc(']');
}
WG__FN void wg_end(void) { wg__putc('}'); }

/* One function per effect kind (hostabi/effects.go); the host checks each
 * at the hook it was given for. Text arguments may be empty where the
 * kind allows it, and are then left out. */

WG__FN void wg__text_effect(const char *kind, const char *key, wg_str text) {
	wg_effect(kind);
	if (text.n)
		wg_put_str(key, text);
	wg_end();
}

/* wg_set_note: the op's durable memory under key (any hook). */
WG__FN void wg_set_note(wg_str key, wg_str value) {
	wg_effect("note");
	wg_put_str("key", key);
	if (value.n)
		wg_put_str("value", value);
	wg_end();
}
/* wg_live_log: a line watchers of the session see (not durable). */
WG__FN void wg_live_log(wg_str level, wg_str text) {
	wg_effect("log");
	if (level.n)
		wg_put_str("level", level);
	wg_put_str("text", text);
	wg_end();
}
/* prompt */
WG__FN void wg_admit(void) { wg__text_effect("admit", "text", (wg_str){0}); }
WG__FN void wg_reject(wg_str why) { wg__text_effect("reject", "text", why); }
/* contribute: a tool the op owns (parameters: a JSON Schema as text, or
 * empty), a system prompt part, a top-of-mind line, ending the turn. */
WG__FN void wg_offer_tool(wg_str name, wg_str description, wg_str parameters) {
	wg_effect("tool");
	wg__key("tool");
	wg__put("{\"name\":", 8);
	wg__quote(name);
	if (description.n)
		wg_put_str("description", description);
	if (parameters.n)
		wg_put_raw("parameters", parameters);
	wg__putc('}');
	wg_end();
}
WG__FN void wg_prompt_part(wg_str text) { wg__text_effect("prompt_part", "text", text); }
WG__FN void wg_top_of_mind(wg_str text) { wg__text_effect("top_of_mind", "text", text); }
WG__FN void wg_end_turn(wg_str why) { wg__text_effect("end_turn", "text", why); }
/* compact */
WG__FN void wg_compact(wg_str instructions) { wg__text_effect("compact", "text", instructions); }
/* tool: guards decide and ask; owners (when the view's run names the
 * call) and ops answering calls no op owns give results. */
WG__FN void wg__decision(wg_str call_id, bool allow, const char *scope, wg_str why) {
	wg_effect("decision");
	wg_put_str("call_id", call_id);
	if (allow)
		wg_put_bool("allow", true);
	wg_put_str("scope", wg_cstr(scope));
	if (why.n)
		wg_put_str("text", why);
	wg_end();
}
WG__FN void wg_decide(wg_str call_id, bool allow, wg_str why) { wg__decision(call_id, allow, "once", why); }
WG__FN void wg_decide_always(wg_str call_id, bool allow, wg_str why) { wg__decision(call_id, allow, "always", why); }
WG__FN void wg_ask_approval(const wg_str *call_ids, size_t n, wg_str why) {
	wg_effect("approval_request");
	wg_put_strs("call_ids", call_ids, n);
	if (why.n)
		wg_put_str("text", why);
	wg_end();
}
WG__FN void wg__result(wg_str call_id, wg_str content, bool is_error, wg_str code, bool concludes) {
	wg_effect("result");
	wg_put_str("call_id", call_id);
	if (content.n)
		wg_put_str("content", content);
	if (is_error)
		wg_put_bool("is_error", true);
	if (code.n)
		wg_put_str("code", code);
	if (concludes)
		wg_put_bool("concludes_turn", true);
	wg_end();
}
WG__FN void wg_result(wg_str call_id, wg_str content, bool is_error) { wg__result(call_id, content, is_error, (wg_str){0}, false); }
WG__FN void wg_error_result(wg_str call_id, wg_str content, wg_str code) { wg__result(call_id, content, true, code, false); }
WG__FN void wg_final_result(wg_str call_id, wg_str content) { wg__result(call_id, content, false, (wg_str){0}, true); }
/* request-error: request again after delay_ms (0 to a day). */
WG__FN void wg_retry(int64_t delay_ms) {
	wg_effect("retry");
	if (delay_ms)
		wg_put_int("delay_ms", delay_ms);
	wg_end();
}
/* turn-stopping: a next-step message; the turn goes on. */
WG__FN void wg_steer(wg_str text) { wg__text_effect("steer", "text", text); }
/* command: the command's answer. */
WG__FN void wg_reply(wg_str text) { wg__text_effect("reply", "text", text); }

/* ---- Handlers ------------------------------------------------------------ */

typedef int (*wg_handler)(const wg_view *v);

/* wg_handle runs one hook call: it resets the arena, reads and decodes
 * the view, runs fn and hands its answer to the host. */
WG__FN int32_t wg_handle(int32_t view_len, wg_handler fn) {
	wg__reset();
	wg__out.p = NULL, wg__out.n = 0, wg__out.cap = 0, wg__out.count = 0;
	wg__fields.doc = wg__fields.doc_end = NULL;
	wg__fields.p = NULL, wg__fields.n = 0, wg__fields.f = NULL, wg__fields.count = 0, wg__fields.cap = 0;
	size_t cap = view_len > 0 ? (size_t)view_len : 1;
	char *buf = wg_alloc(cap);
	int32_t n = wg__host_view(buf, (int32_t)cap);
	if (n > (int32_t)cap) {
		cap = (size_t)n;
		buf = wg_alloc(cap);
		n = wg__host_view(buf, n);
	}
	if (n >= 0 && (size_t)n <= cap)
		wg__fields.doc = buf, wg__fields.doc_end = buf + n;
	wg_view v;
	if (n < 0 || !wg__parse_view((wg_str){buf, (size_t)n}, &v))
		return wg_fail("wagent.h: the view is not a JSON object of the ABI");
	int status = fn(&v);
	if (status != WG_OK)
		return WG_ERROR;
	if (wg__out.count) {
		wg__putc(']');
		wg__host_effects(wg__out.p, (int32_t)wg__out.n);
	}
	return WG_OK;
}

/* WAGENT_ON(hook, fn) exports fn as the handler of hook, written as in
 * the export's name: prompt, contribute, compact, tool, request_error,
 * turn_stopping, command. The manifest must declare the hook. */
#define WAGENT_ON(hook, fn)                                                              \
	__attribute__((export_name("wagent_on_" #hook))) int32_t wagent_on_##hook(int32_t n) { \
		return wg_handle(n, fn);                                                         \
	}

#endif /* WAGENT_H */
