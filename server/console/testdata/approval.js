'use strict';
// Runs the console's app.js in Node, on a page just big enough for it
// (the elements it makes and finds, by tag and class), against a real
// owner; waits for a call's card, does what the scenario says on it, and
// prints the card's status once the decision was sent (console_test.go
// reads it). No browser: make e2e runs the real one.
//
//   node approval.js APP.JS SCENARIO.JSON
//
// The scenario: {"owner": URL, "token": T, "session": ID, "call": ID,
// "steps": [{"fill": "deny-reason", "value": "…"} | {"click": "deny"} |
// {"key": "Enter", "on": "deny-reason"}]}.

const fs = require('fs');
const vm = require('vm');

const [appPath, scenarioPath] = process.argv.slice(2);
const scenario = JSON.parse(fs.readFileSync(scenarioPath, 'utf8'));

class Text {
  constructor(t) {
    this.data = String(t);
    this.parentNode = null;
  }
  get textContent() {
    return this.data;
  }
  remove() {
    detach(this);
  }
}

function detach(n) {
  if (!n.parentNode) return;
  const kids = n.parentNode.childNodes;
  kids.splice(kids.indexOf(n), 1);
  n.parentNode = null;
}

class Element {
  constructor(tag) {
    this.tagName = tag.toUpperCase();
    this.childNodes = [];
    this.parentNode = null;
    this.attributes = {};
    this.listeners = {};
    this.dataset = {};
    this.className = '';
    this.id = '';
    this.hidden = false;
    this.disabled = false;
    this.value = '';
    this.scrollHeight = 0;
    const classes = () => this.className.split(/\s+/).filter(Boolean);
    this.classList = {
      contains: (c) => classes().includes(c),
      add: (...cs) => {
        this.className = [...new Set([...classes(), ...cs])].join(' ');
      },
      remove: (...cs) => {
        this.className = classes().filter((c) => !cs.includes(c)).join(' ');
      },
      toggle: (c, on) => {
        if (on === undefined) on = !classes().includes(c);
        if (on) this.classList.add(c);
        else this.classList.remove(c);
        return on;
      },
    };
  }
  append(...kids) {
    for (let k of kids) {
      if (!(k instanceof Element) && !(k instanceof Text)) k = new Text(k);
      detach(k);
      k.parentNode = this;
      this.childNodes.push(k);
    }
  }
  insertBefore(k, ref) {
    detach(k);
    k.parentNode = this;
    const i = ref ? this.childNodes.indexOf(ref) : -1;
    if (i < 0) this.childNodes.push(k);
    else this.childNodes.splice(i, 0, k);
    return k;
  }
  replaceChildren(...kids) {
    for (const k of [...this.childNodes]) detach(k);
    this.append(...kids);
  }
  remove() {
    detach(this);
  }
  get firstChild() {
    return this.childNodes[0] || null;
  }
  get nextSibling() {
    if (!this.parentNode) return null;
    const kids = this.parentNode.childNodes;
    return kids[kids.indexOf(this) + 1] || null;
  }
  get children() {
    return this.childNodes.filter((k) => k instanceof Element);
  }
  get textContent() {
    return this.childNodes.map((k) => k.textContent).join('');
  }
  set textContent(t) {
    this.replaceChildren();
    if (t !== '' && t !== null && t !== undefined) this.append(String(t));
  }
  setAttribute(n, v) {
    this.attributes[n] = String(v);
  }
  getAttribute(n) {
    return n in this.attributes ? this.attributes[n] : null;
  }
  removeAttribute(n) {
    delete this.attributes[n];
  }
  addEventListener(type, fn) {
    (this.listeners[type] = this.listeners[type] || []).push(fn);
  }
  dispatch(type, init) {
    const ev = Object.assign({ type, target: this, defaultPrevented: false }, init);
    ev.preventDefault = () => {
      ev.defaultPrevented = true;
    };
    for (const fn of this.listeners[type] || []) fn(ev);
    return ev;
  }
  click() {
    if (!this.disabled) this.dispatch('click', {});
  }
  focus() {}
  // matches takes what app.js asks for: "tag", ".class", "tag.class",
  // and lists of them.
  matches(sel) {
    return sel.split(',').some((one) => {
      const [tag, ...cls] = one.trim().split('.');
      return (!tag || this.tagName === tag.toUpperCase()) && cls.every((c) => this.classList.contains(c));
    });
  }
  querySelectorAll(sel) {
    const out = [];
    const walk = (e) => {
      for (const k of e.children) {
        if (k.matches(sel)) out.push(k);
        walk(k);
      }
    };
    walk(this);
    return out;
  }
  querySelector(sel) {
    return this.querySelectorAll(sel)[0] || null;
  }
}

const byId = new Map();
const document = {
  hidden: false,
  body: new Element('body'),
  documentElement: new Element('html'),
  createElement: (tag) => new Element(tag),
  getElementById(id) {
    if (!byId.has(id)) {
      const e = new Element('div');
      e.id = id;
      byId.set(id, e);
    }
    return byId.get(id);
  },
  addEventListener() {},
};

const store = new Map([['wagent-token', scenario.token]]);
const sessionStorage = {
  getItem: (k) => (store.has(k) ? store.get(k) : null),
  setItem: (k, v) => store.set(k, String(v)),
  removeItem: (k) => store.delete(k),
};

// The page's fetch reaches the owner; decisions are counted.
let sent = 0;
function fetch(path, init) {
  if (init && init.method === 'POST' && path.endsWith('/decisions')) sent++;
  return globalThis.fetch(scenario.owner + path, init);
}

const window = { innerHeight: 800, scrollY: 0, scrollTo() {}, addEventListener() {} };
const page = vm.createContext({
  document, window, sessionStorage, fetch,
  location: { hash: '', href: 'http://owner/' },
  setTimeout, clearTimeout, AbortController, TextDecoderStream, console,
});
vm.runInContext(fs.readFileSync(appPath, 'utf8'), page, { filename: 'app.js' });

function until(what, cond) {
  return new Promise((resolve, reject) => {
    const start = Date.now();
    const poll = () => {
      const v = cond();
      if (v) return resolve(v);
      if (Date.now() - start > 5000) return reject(new Error('gave up waiting for ' + what));
      setTimeout(poll, 5);
    };
    poll();
  });
}

(async () => {
  const card = await until('the call\'s card', () =>
    document.getElementById('approval-list').querySelectorAll('article.approval').find((c) => c.dataset.session === scenario.session && c.dataset.call === scenario.call));
  const find = (sel) => {
    const e = card.querySelector(sel);
    if (!e) throw new Error('the card has no ' + sel);
    return e;
  };
  for (const step of scenario.steps) {
    if (step.fill) find('.' + step.fill).value = step.value;
    if (step.click) find('button.' + step.click).click();
    if (step.key) find('.' + step.on).dispatch('keydown', { key: step.key });
  }
  const status = find('.decide-status');
  await until('the decision sent', () => sent > 0 && status.textContent !== 'Sending…');
  process.stdout.write(JSON.stringify({ status: status.textContent, decided: card.classList.contains('decided') }));
  process.exit(0);
})().catch((e) => {
  process.stderr.write(String(e && e.stack ? e.stack : e) + '\n');
  process.exit(1);
});
