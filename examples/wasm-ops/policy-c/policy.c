/*
 * policy: the Go policy example (guests/examples/policy) in C, with the
 * single-header kit guests/c/wagent.h. It has two hooks, and answers
 * exactly as the Go op does:
 *
 *   - tool: an allow-list approval. Calls to tools on the config's allow
 *     list are allowed, calls on its deny list are denied, calls to a
 *     tool a person allowed "always" (remembered in the note
 *     "always:TOOL") are allowed, and anything else is put to a person.
 *   - turn-stopping: a stop check. When the last user message asked a
 *     question and the model's answer is empty, it steers the turn on
 *     once (remembering in the note "steered" that it did), reading only
 *     the last eight messages however long the conversation is.
 *
 * Config: {"allow": ["calc_total"], "deny": ["rm"]}.
 */
#include "../../../guests/c/wagent.h"

static int decide(const wg_view *v) {
	wg_str allow = {0}, deny = {0};
	if (wg_json_field(v->config, "allow", &allow) && !wg_json_is_strings(allow))
		return wg_fail("config: allow is not a list of strings");
	if (wg_json_field(v->config, "deny", &deny) && !wg_json_is_strings(deny))
		return wg_fail("config: deny is not a list of strings");

	/* The calls to put to a person, at most as many as there are calls. */
	wg_iter it = wg_calls(v);
	size_t n = 0, cap = 16;
	wg_str *ask = wg_alloc(cap * sizeof *ask);
	wg_call c;
	while (wg_next_call(&it, &c)) {
		if (c.decision.n || c.requested)
			continue;
		if (wg_json_has_string(allow, c.name)) {
			wg_decide(c.id, true, WG_S("on the allow list"));
		} else if (wg_json_has_string(deny, c.name)) {
			wg_decide(c.id, false, WG_S("on the deny list"));
		} else {
			wg_str note;
			if (wg_note(wg_concat(WG_S("always:"), c.name), &note) && wg_eq(note, WG_S("allow"))) {
				wg_decide(c.id, true, WG_S("allowed always"));
				continue;
			}
			if (n == cap) {
				wg_str *more = wg_alloc(2 * cap * sizeof *more);
				memcpy(more, ask, n * sizeof *ask);
				cap = 2 * cap;
				ask = more;
			}
			ask[n++] = c.id;
		}
	}
	if (n)
		wg_ask_approval(ask, n, WG_S("not on the allow list"));
	return WG_OK;
}
WAGENT_ON(tool, decide)

/* is_space reports whether rune r is white space as Go's unicode.IsSpace
 * has it, so that "empty" means what strings.TrimSpace means. */
static bool is_space(uint32_t r) {
	switch (r) {
	case '\t': case '\n': case '\v': case '\f': case '\r': case ' ':
	case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029:
	case 0x202F: case 0x205F: case 0x3000:
		return true;
	}
	return r >= 0x2000 && r <= 0x200A;
}

/* blank reports whether s is only white space (invalid UTF-8 is not). */
static bool blank(wg_str s) {
	const unsigned char *p = (const unsigned char *)s.p, *e = p + s.n;
	while (p < e) {
		uint32_t r;
		int len;
		if (p[0] < 0x80)
			r = p[0], len = 1;
		else if ((p[0] & 0xE0) == 0xC0 && e - p >= 2 && (p[1] & 0xC0) == 0x80)
			r = (uint32_t)(p[0] & 0x1F) << 6 | (p[1] & 0x3F), len = 2;
		else if ((p[0] & 0xF0) == 0xE0 && e - p >= 3 && (p[1] & 0xC0) == 0x80 && (p[2] & 0xC0) == 0x80)
			r = (uint32_t)(p[0] & 0x0F) << 12 | (uint32_t)(p[1] & 0x3F) << 6 | (p[2] & 0x3F), len = 3;
		else
			return false; /* invalid, or a 4-byte rune: none is a space */
		if (!is_space(r))
			return false;
		p += len;
	}
	return true;
}

static int stop_check(const wg_view *v) {
	wg_str turn = wg_itoa(v->turn), note;
	if (wg_note(WG_S("steered"), &note) && wg_eq(note, turn))
		return WG_OK; /* once per turn */
	if (!v->stop.n || !blank(wg_field_string(v->stop, "content")))
		return WG_OK;
	/* The last user message, looking back a few messages at most. */
	for (int64_t i = v->messages - 1; i >= 0 && i >= v->messages - 8; i--) {
		wg_message m;
		if (!wg_message_get(i, &m))
			break;
		if (wg_eq(m.role, WG_S("user"))) {
			if (wg_contains_byte(m.content, '?')) {
				wg_set_note(WG_S("steered"), turn);
				wg_steer(WG_S("The user asked a question; answer it."));
			}
			break;
		}
	}
	return WG_OK;
}
WAGENT_ON(turn_stopping, stop_check)
