'use strict';
// The wagent console.
//
// One rule above all: every string that comes from the owner (what models,
// tools, ops and people wrote, session titles, ids, errors) enters the page
// as text, through textContent or the text nodes Element.append makes.
// Nothing here parses HTML, and the page's Content-Security-Policy
// (Trusted Types) makes the HTML sinks throw if anyone ever tries.
//
// The token is kept in this tab's sessionStorage and sent as an
// Authorization header, by fetch only: the stream is read with fetch too,
// not EventSource, which cannot send headers (README.md says why).

(() => {
  const TOKEN_KEY = 'wagent-token';
  const POLL_MS = 2500;
  const WHO = 'console';
  // MAX_REASON bounds a denial's reason: a sentence or two for the model.
  const MAX_REASON = 1000;

  const $ = (id) => document.getElementById(id);

  const app = {
    token: '',
    started: false,
    timer: 0,
    current: null, // the id of the session on screen
    follow: null, // the AbortController of its stream
    conv: null, // its conversation
    sessionItems: new Map(), // id -> list item parts
    approvalCards: new Map(), // session + call -> card, in the side list
    sessionCards: new Map(), // call -> card, in the session view
    streamUp: false,
    pollError: '',
  };

  // el makes an element with a class and children; strings become text
  // nodes.
  function el(tag, cls, ...kids) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    for (const k of kids) {
      if (k !== null && k !== undefined && k !== false) e.append(k);
    }
    return e;
  }

  function option(value, label) {
    const o = el('option', '', label);
    o.value = value;
    return o;
  }

  function button(cls, label, onClick) {
    const b = el('button', cls, label);
    b.type = 'button';
    b.addEventListener('click', onClick);
    return b;
  }

  // ---- the API ----

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  function sessionPath(id, verb) {
    return '/v1/sessions/' + encodeURIComponent(id) + (verb ? '/' + verb : '');
  }

  function authHeaders(extra) {
    const h = Object.assign({}, extra);
    if (app.token) h.Authorization = 'Bearer ' + app.token;
    return h;
  }

  async function apiError(r) {
    let code = 'http_' + r.status;
    let message = 'HTTP ' + r.status;
    try {
      const e = await r.json();
      if (e && e.error) {
        code = e.error.code || code;
        message = e.error.message || message;
      }
    } catch (_) {
      // not JSON: keep the status
    }
    if (r.status === 401 && app.started) signedOut('The owner refused the token: sign in again.');
    return new ApiError(r.status, code, message);
  }

  async function api(method, path, body) {
    const init = { method, headers: authHeaders({ Accept: 'application/json' }), cache: 'no-store' };
    if (body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let r;
    try {
      r = await fetch(path, init);
    } catch (e) {
      throw new ApiError(0, 'network', 'cannot reach the owner (' + e.message + ')');
    }
    if (!r.ok) throw await apiError(r);
    return r.json();
  }

  // ---- signing in ----

  function showLogin(message) {
    $('console').hidden = true;
    $('logout').hidden = true;
    $('login').hidden = false;
    $('login-error').textContent = message || '';
    $('token').focus();
  }

  function signedOut(message) {
    app.token = '';
    app.started = false;
    sessionStorage.removeItem(TOKEN_KEY);
    clearTimeout(app.timer);
    openSession(null);
    setConn('');
    showLogin(message);
  }

  async function onLogin(ev) {
    ev.preventDefault();
    const tok = $('token').value.trim();
    if (!tok) return;
    app.token = tok;
    $('login-error').textContent = 'Checking…';
    try {
      await api('GET', '/v1/sessions');
    } catch (e) {
      app.token = '';
      $('login-error').textContent = e.status === 401 ? 'The owner refused this token.' : '⚠ ' + e.message;
      return;
    }
    sessionStorage.setItem(TOKEN_KEY, tok);
    $('token').value = '';
    enter();
  }

  function enter() {
    app.started = true;
    $('login').hidden = true;
    $('console').hidden = false;
    $('logout').hidden = !app.token;
    route();
    refresh();
    loadChoices();
  }

  // loadChoices fills the Start form's pickers with the owner config's
  // profiles (its default first) and the pipelines this client may name.
  async function loadChoices() {
    let c;
    try {
      c = await api('GET', '/v1/choices');
    } catch (e) {
      return; // an older owner: the form starts sessions with its defaults
    }
    const prof = $('new-profile');
    const pipe = $('new-pipeline');
    prof.replaceChildren(option('', c.default_profile
      ? 'the owner\'s default (' + c.default_profile + ')'
      : 'the owner\'s default' + (c.model ? ' (' + c.model + ')' : '')));
    for (const p of c.profiles || []) {
      const bits = [p.provider, p.model].filter(Boolean).join(' ');
      prof.append(option(p.name, bits ? p.name + ' — ' + bits : p.name));
    }
    pipe.replaceChildren(option('', 'the profile\'s, or the built-in'));
    for (const p of c.pipelines || []) {
      pipe.append(option(p.pipeline, p.name));
    }
  }

  // ---- connection status ----

  function setConn(text) {
    $('conn').textContent = text;
  }

  function showConn() {
    if (!app.started) return;
    if (app.pollError) setConn('⚠ ' + app.pollError);
    else if (app.current && !app.streamUp) setConn('○ Reconnecting…');
    else if (app.current) setConn('● Live');
    else setConn('● Connected');
  }

  // ---- polling the lists ----

  function refreshSoon() {
    if (!app.started) return;
    clearTimeout(app.timer);
    app.timer = setTimeout(refresh, 150);
  }

  async function refresh() {
    clearTimeout(app.timer);
    if (!app.started) return;
    if (!document.hidden) {
      try {
        const [list, ap] = await Promise.all([api('GET', '/v1/sessions'), api('GET', '/v1/approvals')]);
        renderSessions(list.sessions || []);
        renderApprovals(ap.approvals || []);
        await refreshCurrent();
        app.pollError = '';
      } catch (e) {
        if (!app.started) return;
        app.pollError = e.message;
      }
      showConn();
    }
    if (app.started) app.timer = setTimeout(refresh, POLL_MS);
  }

  // ---- words for states and times ----

  function plural(n, word) {
    return n + ' ' + word + (n === 1 ? '' : 's');
  }

  // statusInfo returns a class and words (with a symbol) for a summary's
  // status, so that it reads without colour.
  function statusInfo(s) {
    const n = (s.waiting || []).length;
    if (s.status === 'running') return ['running', '▶ running'];
    if (s.status === 'waiting' || n > 0) return ['waiting', n > 0 ? '⚑ waiting for ' + plural(n, 'approval') : '⚑ waiting for a decision'];
    if (s.status === 'error') return ['broken', '✗ last turn failed' + (s.error ? ': ' + s.error : '') + ' (resume retries it)'];
    if (s.status === 'idle') return ['idle', s.queued ? '○ idle, ' + s.queued + ' queued' : '○ idle'];
    return ['broken', '⚠ ' + s.status];
  }

  function setStatus(node, s) {
    const [cls, words] = statusInfo(s);
    node.className = 'status status-' + cls;
    node.textContent = words;
  }

  function ago(iso) {
    const t = Date.parse(iso);
    if (!iso || isNaN(t) || t < Date.UTC(2000, 0, 1)) return 'no activity';
    const s = Math.round((Date.now() - t) / 1000);
    if (s < 5) return 'just now';
    if (s < 60) return s + ' s ago';
    if (s < 3600) return Math.floor(s / 60) + ' min ago';
    if (s < 86400) return Math.floor(s / 3600) + ' h ago';
    return new Date(t).toLocaleString();
  }

  function pretty(v) {
    if (v === undefined || v === null) return '(no arguments)';
    if (typeof v === 'string') return v;
    return JSON.stringify(v, null, 2);
  }

  function compact(v, max) {
    let s = v === undefined || v === null ? '' : typeof v === 'string' ? v : JSON.stringify(v);
    if (s.length > max) s = s.slice(0, max) + '…';
    return s;
  }

  // ---- the sessions list ----

  function renderSessions(list) {
    const ul = $('session-list');
    const seen = new Set();
    let prev = null;
    for (const s of list) {
      seen.add(s.id);
      let item = app.sessionItems.get(s.id);
      if (!item) {
        item = makeSessionItem(s.id);
        app.sessionItems.set(s.id, item);
      }
      fillSessionItem(item, s);
      const want = prev ? prev.nextSibling : ul.firstChild;
      if (item.li !== want) ul.insertBefore(item.li, want);
      prev = item.li;
    }
    for (const [id, item] of app.sessionItems) {
      if (!seen.has(id)) {
        item.li.remove();
        app.sessionItems.delete(id);
      }
    }
    $('sessions-empty').hidden = list.length > 0;
  }

  function makeSessionItem(id) {
    const title = el('span', 's-title');
    const status = el('span', 'status');
    const meta = el('span', 's-meta');
    const a = el('a', 'session-link', title, status, meta);
    a.href = '#/s/' + encodeURIComponent(id);
    a.dataset.session = id;
    const li = el('li', null, a);
    return { li, a, title, status, meta };
  }

  function fillSessionItem(item, s) {
    item.title.textContent = s.name || s.title || '(untitled)';
    setStatus(item.status, s);
    item.meta.textContent = plural(s.turns || 0, 'turn') + ' · ' + ago(s.last_activity) + ' · ' + s.id;
    if (s.id === app.current) item.a.setAttribute('aria-current', 'page');
    else item.a.removeAttribute('aria-current');
  }

  // ---- approvals ----

  function fact(dl, term, value) {
    dl.append(el('dt', null, term), el('dd', null, value));
  }

  // makeApproval makes the card of one waiting call, with its buttons.
  function makeApproval(session, title, call, inSession) {
    const card = el('article', 'approval');
    card.dataset.session = session;
    card.dataset.call = call.id;
    card.append(el('h3', null, el('span', 'sym', '⚑ '), 'Run ', el('code', 'tool-name', call.name || '(unnamed tool)'), '?'));
    const dl = el('dl', 'facts');
    fact(dl, 'Asked by', call.asked_by || '(a guard)');
    fact(dl, 'Why', call.reason || '(no reason given)');
    if (call.owner) fact(dl, 'Runs in', call.owner);
    if (!inSession) {
      const link = el('a', null, title || session);
      link.href = '#/s/' + encodeURIComponent(session);
      fact(dl, 'Session', link);
    }
    fact(dl, 'Call', call.id);
    card.append(dl);
    const args = el('pre', 'args', pretty(call.arguments));
    args.tabIndex = 0;
    args.setAttribute('aria-label', 'Arguments');
    card.append(el('p', 'args-label', 'Arguments'), args);
    if (call.preview) {
      // What the call would change (a write's unified diff), as the owner
      // read it through the op's mount; lines as text, never as markup.
      const diff = el('pre', 'args diff');
      for (const line of call.preview.replace(/\n$/, '').split('\n')) {
        const c = line[0];
        const cls = line.startsWith('@@') ? 'hunk' : c === '+' && !line.startsWith('+++') ? 'add' : c === '-' && !line.startsWith('---') ? 'del' : null;
        diff.append(el('span', cls, line + '\n'));
      }
      diff.tabIndex = 0;
      diff.setAttribute('aria-label', 'Changes');
      card.append(el('p', 'args-label', 'Changes'), diff);
    }
    const out = el('p', 'decide-status');
    out.setAttribute('role', 'status');
    // A denial can say why: the reason is the decision's note, and the
    // model reads it in the call's result ("the call was denied: …").
    const reason = el('input', 'deny-reason');
    reason.type = 'text';
    reason.maxLength = MAX_REASON;
    reason.autocomplete = 'off';
    reason.placeholder = 'Why deny? (optional; the model reads it)';
    reason.setAttribute('aria-label', 'Why deny ' + (call.name || 'the call') + '? Optional; the model reads it');
    const allow = button('allow', '✓ Allow', () => decide(card, out, session, call, true, false, ''));
    const deny = button('deny', '✗ Deny', () => decide(card, out, session, call, false, false, reason.value.trim()));
    const always = button('always', '✓✓ Always', () => decide(card, out, session, call, true, true, ''));
    // Enter in the reason denies: typing a reason is choosing to deny.
    reason.addEventListener('keydown', (ev) => {
      if (ev.key === 'Enter' && !ev.isComposing) {
        ev.preventDefault();
        if (!deny.disabled) deny.click();
      }
    });
    allow.setAttribute('aria-label', 'Allow ' + (call.name || 'the call') + ' once');
    deny.setAttribute('aria-label', 'Deny ' + (call.name || 'the call'));
    always.setAttribute('aria-label', 'Always allow ' + (call.name || 'the tool') + ' in this session');
    always.title = 'Allow, and allow this tool from now on in this session';
    card.append(reason, el('div', 'actions', allow, deny, always), out);
    return card;
  }

  // decide sends one call's decision; a denial's reason goes as its note.
  // decide sends the decision about the call the card shows: its key and
  // the digest of the tool and arguments on the card, so the owner records
  // it only for that call, still waiting as shown.
  async function decide(card, out, session, call, allow, always, reason) {
    const controls = card.querySelectorAll('button, input');
    for (const b of controls) b.disabled = true;
    out.textContent = 'Sending…';
    const d = { call_id: call.id, digest: call.digest, allow, always };
    if (!allow && reason) d.note = reason;
    try {
      await api('POST', sessionPath(session, 'decisions'), { decisions: [d], who: WHO });
      out.textContent = allow ? (always ? '✓ Allowed, always' : '✓ Allowed') : '✗ Denied' + (d.note ? ': ' + d.note : '');
      card.classList.add('decided');
    } catch (e) {
      const final = e.code === 'already_decided' || e.code === 'not_waiting' || e.code === 'changed';
      out.textContent = (final ? '' : '⚠ ') + e.message;
      if (final) card.classList.add('decided');
      else for (const b of controls) b.disabled = false;
    }
    refreshSoon();
  }

  // syncCards keeps container's cards to the wanted ones, by key, leaving
  // the cards already there untouched (and focused where they were).
  function syncCards(container, cards, wanted) {
    for (const [key, card] of cards) {
      if (!wanted.has(key)) {
        card.remove();
        cards.delete(key);
      }
    }
    const stick = nearBottom();
    let added = false;
    for (const [key, make] of wanted) {
      if (!cards.has(key)) {
        const card = make();
        cards.set(key, card);
        container.append(card);
        added = true;
      }
    }
    if (added && stick && container.id === 's-approvals') toBottom();
  }

  function renderApprovals(list) {
    const wanted = new Map();
    for (const a of list) {
      wanted.set(a.session + '\n' + a.id, () => makeApproval(a.session, a.title, a, false));
    }
    syncCards($('approval-list'), app.approvalCards, wanted);
    $('approvals-empty').hidden = list.length > 0;
    $('approvals-count').textContent = list.length ? '(' + list.length + ')' : '';
  }

  // ---- one session ----

  function route() {
    let id = null;
    const m = location.hash.match(/^#\/s\/(.+)$/);
    if (m) {
      try {
        id = decodeURIComponent(m[1]);
      } catch (_) {
        id = null;
      }
    }
    if (!app.started) return;
    if (id !== app.current) openSession(id);
    document.body.classList.toggle('has-session', !!id);
    $('session').hidden = !id;
    $('placeholder').hidden = !!id;
    for (const [sid, item] of app.sessionItems) {
      if (sid === id) item.a.setAttribute('aria-current', 'page');
      else item.a.removeAttribute('aria-current');
    }
  }

  function openSession(id) {
    if (app.follow) app.follow.abort();
    app.follow = null;
    app.current = id;
    app.streamUp = false;
    $('conversation').replaceChildren();
    $('s-approvals').replaceChildren();
    app.sessionCards.clear();
    $('s-title').textContent = id || '';
    $('s-status').textContent = '';
    $('s-meta').textContent = '';
    $('s-cancel').hidden = true;
    $('composer-status').textContent = '';
    if (!id) {
      app.conv = null;
      showConn();
      return;
    }
    app.conv = new Conversation($('conversation'));
    const ctl = new AbortController();
    app.follow = ctl;
    followStream(id, app.conv, ctl.signal);
    refreshCurrent();
    window.scrollTo(0, 0);
  }

  async function refreshCurrent() {
    const id = app.current;
    if (!id) return;
    let s;
    try {
      s = await api('GET', sessionPath(id));
    } catch (e) {
      if (id === app.current && e.status === 404) {
        $('s-status').textContent = '⚠ no such session';
        $('s-status').className = 'status status-broken';
        return;
      }
      throw e;
    }
    if (id !== app.current) return;
    renderHead(s);
    const wanted = new Map();
    for (const c of s.waiting || []) wanted.set(c.id, () => makeApproval(s.id, s.title, c, true));
    syncCards($('s-approvals'), app.sessionCards, wanted);
  }

  function renderHead(s) {
    $('s-title').textContent = s.title || s.id;
    setStatus($('s-status'), s);
    const bits = [plural(s.turns || 0, 'turn')];
    if (s.model) bits.push('model ' + s.model);
    bits.push(ago(s.last_activity), 'id ' + s.id);
    $('s-meta').textContent = ' · ' + bits.join(' · ');
    $('s-cancel').hidden = !(s.status === 'running' || s.status === 'waiting' || s.turn_open);
  }

  // liveStatus shows a status the stream announced before the next poll.
  function liveStatus(status) {
    if (status === 'running') {
      setStatus($('s-status'), { status: 'running' });
      $('s-cancel').hidden = false;
    }
    refreshSoon();
  }

  // ---- the conversation ----

  function nearBottom() {
    const d = document.documentElement;
    return window.innerHeight + window.scrollY >= d.scrollHeight - 120;
  }

  function toBottom() {
    window.scrollTo(0, document.documentElement.scrollHeight);
  }

  class Conversation {
    constructor(ol) {
      this.ol = ol;
      this.calls = new Map(); // call id -> {li, lines}
      this.steers = new Set(); // ids of messages queued as steering
      this.streaming = null; // {li, text} of the answer being streamed
      this.acceptDeltas = true;
    }

    push(li) {
      const stick = nearBottom();
      this.ol.append(li);
      if (stick) toBottom();
    }

    message(cls, who, text, time) {
      const li = el('li', 'msg ' + cls, el('div', 'who', who), el('div', 'text', text));
      if (time) li.title = time;
      return li;
    }

    notice(cls, text, time) {
      const li = el('li', 'notice ' + cls, text);
      if (time) li.title = time;
      return li;
    }

    dropStreaming() {
      if (this.streaming) this.streaming.li.remove();
      this.streaming = null;
    }

    delta(text) {
      if (!this.acceptDeltas || !text) return;
      if (!this.streaming) {
        const t = document.createTextNode('');
        const li = el('li', 'msg assistant streaming', el('div', 'who', 'Assistant, writing…'), el('div', 'text', t));
        this.streaming = { li, text: t };
        this.push(li);
      }
      const stick = nearBottom();
      this.streaming.text.appendData(text);
      if (stick) toBottom();
    }

    call(c) {
      const lines = el('ul', 'call-lines');
      const head = el('div', 'tool-head', el('span', 'sym', '⚙ '), 'Tool ', el('code', 'tool-name', c.name || '(unnamed)'), ' ', el('code', 'tool-args', compact(c.arguments, 160)));
      const li = el('li', 'tool', head, lines);
      li.dataset.call = c.id || '';
      const full = compact(c.arguments, 1e9);
      if (full.length > 160) {
        li.insertBefore(el('details', 'args-more', el('summary', null, 'All arguments'), el('pre', 'args', pretty(c.arguments))), lines);
      }
      const entry = { li, lines };
      this.calls.set(c.id, entry);
      this.push(li);
      return entry;
    }

    callLine(id, cls, text) {
      let entry = this.calls.get(id);
      if (!entry) entry = this.call({ id, name: '(a call)' });
      const li = el('li', cls, text);
      const stick = nearBottom();
      entry.lines.append(li);
      if (stick) toBottom();
      return { entry, li };
    }

    result(d) {
      const label = d.is_error ? '✗ Error' + (d.code ? ' (' + d.code + ')' : '') + ':' : '→ Result:';
      const { entry, li } = this.callLine(d.call_id, d.is_error ? 'result error' : 'result', label);
      li.append(el('pre', 'result-text', d.content || '(empty)'));
      if (d.is_error) entry.li.classList.add('error');
      if (d.concludes_turn) li.append(el('span', 'concludes', ' (ends the turn)'));
    }

    // event renders one durable log event.
    event(ev) {
      const d = ev.data || {};
      const time = ev.time;
      switch (ev.type) {
        case 'turn/start':
          this.push(this.notice('turn', 'Turn ' + d.turn, time));
          break;
        case 'step/start':
          this.acceptDeltas = true;
          break;
        case 'inbox/spliced':
          if (d.list === 'next-step') for (const m of d.inserted || []) this.steers.add(m.id);
          break;
        case 'user/message': {
          let who = 'You';
          if (d.command) who = 'You, command /' + d.command;
          else if (this.steers.has(d.id)) who = 'You, steering';
          this.push(this.message('user', who, d.content || '', time));
          break;
        }
        case 'assistant/message':
          this.dropStreaming();
          this.acceptDeltas = false;
          if (d.content) this.push(this.message('assistant', d.interrupted ? 'Assistant (interrupted)' : 'Assistant', d.content, time));
          for (const c of d.tool_calls || []) this.call(c);
          break;
        case 'assistant/attempt':
          this.push(this.notice('fault', '⚠ The model request failed (attempt ' + d.attempt + '): ' + failure(d.failure), time));
          break;
        case 'retry/scheduled':
          this.push(this.notice('note', '↻ ' + (d.op || 'an op') + ' retries in ' + seconds(d.delay_ms) + ': ' + failure(d.failure), time));
          break;
        case 'approval/request':
          for (const id of d.call_ids || []) this.callLine(id, 'wait', '⚑ Waiting for a person. Asked by ' + (d.op || 'a guard') + (d.reason ? ': ' + d.reason : ''));
          break;
        case 'approval/decision': {
          const verb = d.allow ? '✓ Allowed' : '✗ Denied';
          const scope = d.scope === 'always' ? ', always' : '';
          this.callLine(d.call_id, d.allow ? 'allow' : 'deny', verb + ' by ' + (d.who || 'someone') + scope + (d.note ? ': ' + d.note : ''));
          break;
        }
        case 'tool/call':
          this.callLine(d.call_id, 'run', '▶ Started by ' + (d.op || 'an op') + (d.rerun ? ', again after a crash' : ''));
          break;
        case 'tool/result':
          this.result(d);
          break;
        case 'op/fault':
          this.push(this.notice('fault', '⚠ Op ' + d.op + ' faulted at ' + d.hook + ' (' + d.kind + '): ' + d.message, time));
          break;
        case 'command/reply':
          this.push(this.message('assistant', (d.op || 'An op') + ' replied to /' + (d.command || ''), d.text || '', time));
          break;
        case 'turn/end':
          this.dropStreaming();
          this.acceptDeltas = false;
          this.push(turnEnd(this, d, time));
          break;
        default:
          break; // bookkeeping (headers, notes, writers) is not shown
      }
    }
  }

  function failure(f) {
    if (!f) return 'unknown failure';
    return (f.code || 'failure') + (f.status ? ' ' + f.status : '') + (f.message ? ': ' + f.message : '');
  }

  function seconds(ms) {
    return ((ms || 0) / 1000).toFixed(1) + ' s';
  }

  function turnEnd(conv, d, time) {
    if (d.reason === 'completed' || d.reason === 'concluded') return conv.notice('turn-end', '✓ Turn ' + d.turn + ' done', time);
    let text = '⚠ Turn ' + d.turn + ' ended: ' + d.reason;
    if (d.cause) text += ', by ' + d.cause.kind + (d.cause.reason ? ' (' + d.cause.reason + ')' : '');
    if (d.error) text += ': ' + d.error;
    if (d.message) text += ': ' + d.message;
    return conv.notice('fault', text, time);
  }

  // ---- the stream ----

  // readSSE reads Server-Sent Events from a response body and calls
  // onMessage with each {id, event, data}.
  async function readSSE(body, onMessage) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    let msg = { id: '', event: 'message', data: [] };
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += value;
      let start = 0;
      for (let nl = buf.indexOf('\n', start); nl >= 0; nl = buf.indexOf('\n', start)) {
        let line = buf.slice(start, nl);
        start = nl + 1;
        if (line.endsWith('\r')) line = line.slice(0, -1);
        if (line === '') {
          if (msg.data.length) onMessage({ id: msg.id, event: msg.event, data: msg.data.join('\n') });
          msg = { id: '', event: 'message', data: [] };
          continue;
        }
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        let val = colon < 0 ? '' : line.slice(colon + 1);
        if (val.startsWith(' ')) val = val.slice(1);
        if (field === 'data') msg.data.push(val);
        else if (field === 'event') msg.event = val;
        else if (field === 'id') msg.id = val;
      }
      buf = buf.slice(start);
    }
  }

  function sleep(ms, signal) {
    return new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      signal.addEventListener('abort', () => {
        clearTimeout(t);
        resolve();
      }, { once: true });
    });
  }

  // followStream follows a session's stream until signal aborts,
  // reconnecting after the last durable event it saw (Last-Event-ID), so
  // nothing is missed or shown twice.
  async function followStream(id, conv, signal) {
    let last = 0;
    let delay = 500;
    const mine = () => !signal.aborted && app.conv === conv;
    while (mine()) {
      try {
        const headers = authHeaders({ Accept: 'text/event-stream' });
        if (last > 0) headers['Last-Event-ID'] = String(last);
        const r = await fetch(sessionPath(id, 'stream'), { headers, signal, cache: 'no-store' });
        if (!r.ok) {
          const e = await apiError(r);
          if (r.status === 401) return;
          throw e;
        }
        app.streamUp = true;
        showConn();
        delay = 500;
        await readSSE(r.body, (m) => {
          if (!mine()) return;
          let ev;
          try {
            ev = JSON.parse(m.data);
          } catch (_) {
            return;
          }
          onStream(conv, ev);
          if (m.id) last = Number(m.id) || last;
        });
      } catch (e) {
        if (!mine()) return;
        if (e instanceof ApiError && e.status === 404) {
          conv.push(conv.notice('fault', '⚠ ' + e.message));
          app.streamUp = false;
          showConn();
          return;
        }
      }
      if (!mine()) return;
      app.streamUp = false;
      showConn();
      await sleep(delay, signal);
      delay = Math.min(delay * 2, 10000);
    }
  }

  function onStream(conv, ev) {
    switch (ev.kind) {
      case 'event':
        if (ev.event) conv.event(ev.event);
        if (ev.event && (ev.event.type === 'approval/request' || ev.event.type === 'approval/decision' || ev.event.type === 'turn/end')) refreshSoon();
        break;
      case 'delta':
        conv.delta(ev.text);
        break;
      case 'log':
        conv.push(conv.notice('log', 'Log from ' + (ev.op || 'an op') + ': ' + (ev.text || '')));
        break;
      case 'error':
        // An op's fault is shown from its durable op/fault event; this is
        // the driver's own error.
        if (!ev.op) conv.push(conv.notice('fault', '⚠ ' + (ev.text || 'error')));
        break;
      case 'status':
        liveStatus(ev.status);
        break;
      case 'dropped':
        setConn('○ Catching up…');
        break;
      default:
        break;
    }
  }

  // ---- input ----

  async function submitInput(verb) {
    const id = app.current;
    const ta = $('prompt');
    const out = $('composer-status');
    const text = ta.value;
    if (!id) return;
    if (!text.trim()) {
      out.textContent = 'Type a message first.';
      ta.focus();
      return;
    }
    $('send').disabled = true;
    $('steer').disabled = true;
    out.textContent = verb === 'steer' ? 'Steering…' : 'Sending…';
    try {
      const q = await api('POST', sessionPath(id, verb), { text });
      if (id === app.current) {
        ta.value = '';
        out.textContent = verb === 'steer' ? '✓ Steering queued for the next step (' + q.message_id + ')' : '✓ Sent (' + q.message_id + ')';
      }
    } catch (e) {
      out.textContent = '⚠ ' + e.message;
    } finally {
      $('send').disabled = false;
      $('steer').disabled = false;
    }
    refreshSoon();
  }

  async function cancelTurn() {
    const id = app.current;
    if (!id) return;
    $('s-cancel').disabled = true;
    try {
      await api('POST', sessionPath(id, 'cancel'), { reason: 'stopped from the console', by: 'the web console' });
      $('composer-status').textContent = '■ Stop requested';
    } catch (e) {
      $('composer-status').textContent = '⚠ ' + e.message;
    } finally {
      $('s-cancel').disabled = false;
    }
    refreshSoon();
  }

  async function newSession(ev) {
    ev.preventDefault();
    const ta = $('new-prompt');
    const out = $('new-status');
    const prompt = ta.value.trim();
    out.textContent = 'Starting…';
    try {
      const body = { created_by: WHO };
      if (prompt) body.prompt = prompt;
      const profile = $('new-profile').value;
      const pipeline = $('new-pipeline').value;
      if (profile) body.profile = profile;
      if (pipeline) body.settings = { pipeline: pipeline };
      const s = await api('POST', '/v1/sessions', body);
      ta.value = '';
      out.textContent = '';
      location.hash = '#/s/' + encodeURIComponent(s.id);
    } catch (e) {
      out.textContent = '⚠ ' + e.message;
    }
    refreshSoon();
  }

  function ctrlEnter(ev, action) {
    if (ev.key === 'Enter' && (ev.ctrlKey || ev.metaKey)) {
      ev.preventDefault();
      action();
    }
  }

  // ---- start ----

  async function start() {
    $('login-form').addEventListener('submit', onLogin);
    $('logout').addEventListener('click', () => signedOut('Signed out.'));
    $('composer').addEventListener('submit', (ev) => {
      ev.preventDefault();
      submitInput('send');
    });
    $('steer').addEventListener('click', () => submitInput('steer'));
    $('prompt').addEventListener('keydown', (ev) => ctrlEnter(ev, () => submitInput('send')));
    $('s-cancel').addEventListener('click', cancelTurn);
    $('new-session').addEventListener('submit', newSession);
    $('new-prompt').addEventListener('keydown', (ev) => ctrlEnter(ev, () => $('new-session').requestSubmit()));
    window.addEventListener('hashchange', route);
    document.addEventListener('visibilitychange', () => {
      if (!document.hidden) refreshSoon();
    });

    app.token = sessionStorage.getItem(TOKEN_KEY) || '';
    for (;;) {
      try {
        await api('GET', '/v1/sessions');
        enter();
        return;
      } catch (e) {
        if (e.status === 401) {
          app.token = '';
          sessionStorage.removeItem(TOKEN_KEY);
          showLogin('');
          return;
        }
        setConn('⚠ ' + e.message + '; retrying');
        await new Promise((r) => setTimeout(r, 3000));
      }
    }
  }

  start();
})();
