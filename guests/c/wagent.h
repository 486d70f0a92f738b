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
 *     clang-14 --target=wasm32-wasi -O2 -mexec-model=reactor -nodefaultlibs \
 *         -Wl,--strip-debug -o op.wasm op.c -lc
 *     go run ./guests/cmd/wagent-build -manifest op.manifest.json -o op.wasm op.wasm
 *
 * Memory. Everything a call reads (the view, messages, notes, decoded
 * strings) and writes (the effects) lives in an arena that starts at
 * __heap_base and is reset when the next call starts: nothing survives a
 * call, which is what the ABI asks of instances anyway (durable memory is
 * notes). The arena grows the wasm memory as it needs; past the op's
 * memory limit the call traps and the host records a memory fault.
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
 * (a later ABI minor may add some) are passed over whatever they hold. */

WG__FN const char *wg__ws(const char *p, const char *e) {
	while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

/* wg__skip returns the end of the value at p, or NULL if it is malformed. */
WG__FN const char *wg__skip(const char *p, const char *e, int depth) {
	p = wg__ws(p, e);
	if (p >= e || depth > 512)
		return NULL;
	if (*p == '"') {
		for (p++; p < e; p++) {
			if (*p == '\\')
				p++;
			else if (*p == '"')
				return p + 1;
		}
		return NULL;
	}
	if (*p == '{' || *p == '[') {
		char close = *p == '{' ? '}' : ']';
		bool obj = *p == '{';
		p = wg__ws(p + 1, e);
		if (p < e && *p == close)
			return p + 1;
		for (;;) {
			if (obj) {
				p = wg__skip(p, e, depth + 1); /* the key */
				if (!p)
					return NULL;
				p = wg__ws(p, e);
				if (p >= e || *p != ':')
					return NULL;
				p++;
			}
			p = wg__skip(p, e, depth + 1);
			if (!p)
				return NULL;
			p = wg__ws(p, e);
			if (p < e && *p == ',') {
				p++;
				continue;
			}
			if (p < e && *p == close)
				return p + 1;
			return NULL;
		}
	}
	/* A number, true, false or null. */
	const char *s = p;
	while (p < e && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
		p++;
	return p > s ? p : NULL;
}

/* An iterator over an array's items or an object's members. */
typedef struct {
	const char *p, *e;
	bool obj, ok;
} wg_iter;

/* wg_json_items starts iterating over an array (or an object's members);
 * anything else iterates over nothing. */
WG__FN wg_iter wg_json_items(wg_str raw) {
	const char *p = wg__ws(raw.p, raw.p + raw.n), *e = raw.p + raw.n;
	wg_iter it = {p, e, false, false};
	if (p < e && (*p == '[' || *p == '{')) {
		it.obj = *p == '{';
		it.p = p + 1;
		it.ok = true;
	}
	return it;
}

/* wg_json_next yields the next item (for an object: the next member, its
 * raw key in *key when key is not NULL). */
WG__FN bool wg_json_next(wg_iter *it, wg_str *key, wg_str *val) {
	if (!it->ok)
		return false;
	const char *p = wg__ws(it->p, it->e);
	if (p < it->e && *p == ',')
		p = wg__ws(p + 1, it->e);
	if (p >= it->e || *p == ']' || *p == '}') {
		it->ok = false;
		return false;
	}
	if (it->obj) {
		const char *k = p;
		p = wg__skip(p, it->e, 0);
		if (!p) {
			it->ok = false;
			return false;
		}
		if (key)
			*key = (wg_str){k, (size_t)(p - k)};
		p = wg__ws(p, it->e);
		if (p >= it->e || *p != ':') {
			it->ok = false;
			return false;
		}
		p++;
	}
	p = wg__ws(p, it->e);
	const char *v = p;
	p = wg__skip(p, it->e, 0);
	if (!p) {
		it->ok = false;
		return false;
	}
	*val = (wg_str){v, (size_t)(p - v)};
	it->p = p;
	return true;
}

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

/* wg_json_string decodes a raw JSON string (null gives ""); a string
 * without escapes is returned in place, one with escapes is decoded into
 * the arena. It reports false when raw is not a string. */
WG__FN bool wg_json_string(wg_str raw, wg_str *out) {
	const char *p = wg__ws(raw.p, raw.p + raw.n), *e = raw.p + raw.n;
	if (e - p >= 4 && memcmp(p, "null", 4) == 0) {
		*out = (wg_str){"", 0};
		return true;
	}
	if (p >= e || *p != '"')
		return false;
	const char *s = ++p;
	while (p < e && *p != '"' && *p != '\\')
		p++;
	if (p < e && *p == '"') {
		*out = (wg_str){s, (size_t)(p - s)};
		return true;
	}
	char *o = wg_alloc((size_t)(e - s) + 1), *start = o;
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

/* wg_json_field finds key among the members of the object obj (the last
 * one, if it is there twice) and sets *val to its raw value. It reports
 * false when obj is not an object or has no such key. */
WG__FN bool wg_json_field(wg_str obj, const char *key, wg_str *val) {
	wg_iter it = wg_json_items(obj);
	if (!it.obj)
		return false;
	wg_str want = wg_cstr(key), k, v, dk;
	bool found = false;
	while (wg_json_next(&it, &k, &v)) {
		if (wg_json_string(k, &dk) && wg_eq(dk, want)) {
			*val = v;
			found = true;
		}
	}
	return found;
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
	while (wg_json_next(&it, NULL, &item))
		if (wg_json_string(item, &d) && wg_eq(d, s))
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
	while (wg_json_next(&it, NULL, &item)) {
		if (!wg_json_string(item, &d))
			return false;
		last = it.p;
	}
	p = wg__ws(last, e);
	if (p < e && *p == ',')
		return false; /* a trailing comma, or an item that did not parse */
	return p < e && *p == ']';
}

/* ---- The view ----------------------------------------------------------- */

/* wg_view is the call's view (ABI.md §4). The strings are decoded; the
 * objects (config, tool, ...) are raw JSON, empty when absent. */
typedef struct {
	wg_str hook, session, op;
	int64_t turn, step, messages;
	wg_str config;
	wg_str prompt, tool, failure, stop, command, compact;
	wg_str raw; /* the whole document */
} wg_view;

WG__FN bool wg__parse_view(wg_str doc, wg_view *v) {
	memset(v, 0, sizeof *v);
	v->raw = doc;
	wg_iter it = wg_json_items(doc);
	if (!it.obj)
		return false;
	wg_str k, val, key;
	while (wg_json_next(&it, &k, &val)) {
		if (!wg_json_string(k, &key))
			return false;
		bool ok = true;
		if (wg_eq(key, WG_S("hook")))
			ok = wg_json_string(val, &v->hook);
		else if (wg_eq(key, WG_S("session")))
			ok = wg_json_string(val, &v->session);
		else if (wg_eq(key, WG_S("op")))
			ok = wg_json_string(val, &v->op);
		else if (wg_eq(key, WG_S("turn")))
			ok = wg_json_int(val, &v->turn);
		else if (wg_eq(key, WG_S("step")))
			ok = wg_json_int(val, &v->step);
		else if (wg_eq(key, WG_S("messages")))
			ok = wg_json_int(val, &v->messages);
		else if (wg_eq(key, WG_S("config")))
			v->config = val;
		else if (wg_eq(key, WG_S("prompt")))
			v->prompt = val;
		else if (wg_eq(key, WG_S("tool")))
			v->tool = val;
		else if (wg_eq(key, WG_S("failure")))
			v->failure = val;
		else if (wg_eq(key, WG_S("stop")))
			v->stop = val;
		else if (wg_eq(key, WG_S("command")))
			v->command = val;
		else if (wg_eq(key, WG_S("compact")))
			v->compact = val;
		/* anything else: a key of a later minor, skipped */
		if (!ok)
			return false;
	}
	return true;
}

/* A pending call of the tool view. */
typedef struct {
	wg_str id, name, arguments, owner, server, decision, annotations;
	bool requested, started;
} wg_call;

/* wg_calls iterates over the tool view's pending calls; wg_next_call
 * decodes the next one. */
WG__FN wg_iter wg_calls(const wg_view *v) {
	wg_str calls = {0};
	wg_json_field(v->tool, "calls", &calls);
	return wg_json_items(calls);
}

WG__FN bool wg_next_call(wg_iter *it, wg_call *c) {
	wg_str item, k, val, key;
	if (!wg_json_next(it, NULL, &item))
		return false;
	memset(c, 0, sizeof *c);
	wg_iter f = wg_json_items(item);
	while (wg_json_next(&f, &k, &val)) {
		if (!wg_json_string(k, &key))
			continue;
		if (wg_eq(key, WG_S("id")))
			wg_json_string(val, &c->id);
		else if (wg_eq(key, WG_S("name")))
			wg_json_string(val, &c->name);
		else if (wg_eq(key, WG_S("arguments")))
			c->arguments = val;
		else if (wg_eq(key, WG_S("owner")))
			wg_json_string(val, &c->owner);
		else if (wg_eq(key, WG_S("server")))
			wg_json_string(val, &c->server);
		else if (wg_eq(key, WG_S("decision")))
			wg_json_string(val, &c->decision);
		else if (wg_eq(key, WG_S("annotations")))
			c->annotations = val;
		else if (wg_eq(key, WG_S("requested")))
			wg_json_bool(val, &c->requested);
		else if (wg_eq(key, WG_S("started")))
			wg_json_bool(val, &c->started);
	}
	return true;
}

/* wg_tool_run returns the call id the host asks the op to run (the tool
 * view's run), or an empty string. */
WG__FN wg_str wg_tool_run(const wg_view *v) {
	wg_str raw, s = {"", 0};
	if (wg_json_field(v->tool, "run", &raw))
		wg_json_string(raw, &s);
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
		if (!wg_json_string(k, &key))
			return false;
		if (wg_eq(key, WG_S("role")))
			wg_json_string(val, &m->role);
		else if (wg_eq(key, WG_S("id")))
			wg_json_string(val, &m->id);
		else if (wg_eq(key, WG_S("content")))
			wg_json_string(val, &m->content);
		else if (wg_eq(key, WG_S("call_id")))
			wg_json_string(val, &m->call_id);
		else if (wg_eq(key, WG_S("tool_calls")))
			m->tool_calls = val;
		else if (wg_eq(key, WG_S("is_error")))
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

WG__FN void wg__put(const char *s, size_t n) {
	if (wg__out.n + n > wg__out.cap) {
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
	memcpy(wg__out.p + wg__out.n, s, n);
	wg__out.n += n;
}

WG__FN void wg__putc(char c) { wg__put(&c, 1); }

/* wg__quote writes s as a JSON string. */
WG__FN void wg__quote(wg_str s) {
	static const char hex[] = "0123456789abcdef";
	wg__putc('"');
	size_t run = 0;
	for (size_t i = 0; i < s.n; i++) {
		unsigned char c = (unsigned char)s.p[i];
		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		wg__put(s.p + run, i - run);
		run = i + 1;
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
	}
	wg__put(s.p + run, s.n - run);
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
	wg__quote(wg_cstr(kind));
}

WG__FN void wg__key(const char *key) {
	wg__putc(',');
	wg__quote(wg_cstr(key));
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
	size_t cap = view_len > 0 ? (size_t)view_len : 1;
	char *buf = wg_alloc(cap);
	int32_t n = wg__host_view(buf, (int32_t)cap);
	if (n > (int32_t)cap) {
		buf = wg_alloc((size_t)n);
		n = wg__host_view(buf, n);
	}
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
