// wagent.ts: the AssemblyScript kit for wagent operations (ABI v1,
// hostabi/ABI.md). An op imports it, re-exports the ABI marker and exports
// one handler per hook it declares:
//
//   import { Call, handle, OK } from "../../../guests/assemblyscript/wagent";
//   export { wagent_abi_v1 } from "../../../guests/assemblyscript/wagent";
//
//   function onCommand(c: Call): i32 {
//     c.reply("pong");
//     return OK;
//   }
//   export function wagent_on_command(viewLen: i32): i32 { return handle(viewLen, onCommand); }
//
// Build with asc 0.28 (npm assemblyscript@0.28.20), then embed the
// manifest (wagent-build -manifest):
//
//   asc op.ts -O3 --enable simd --runtime stub --exportStart _initialize \
//     --use abort=PATH/TO/guests/assemblyscript/wagent/abort -o op.wasm
//
// --enable simd lets the reader scan strings 16 bytes at a time (wasm
// SIMD is wasm 2.0, which the host takes); without it the kit works the
// same, a byte at a time.
//
// --runtime stub is a bump allocator without a collector: handle resets
// the whole heap when a call starts, so nothing allocated in one call
// survives to the next (the ABI trusts instances to remember nothing;
// durable memory is notes). Keep no objects in globals between calls.
// --exportStart makes top-level code run from _initialize, not from a
// start section (which the host refuses); --use abort routes the
// runtime's abort (an assert, an index out of range) to this kit, which
// logs its message and traps, since the ABI allows no "env" imports.

// ---- The host imports (module "wagent"; ABI.md §3) ------------------------

@external("wagent", "view")
declare function hostView(buf: usize, cap: i32): i32;
@external("wagent", "message")
declare function hostMessage(index: i32, buf: usize, cap: i32): i32;
@external("wagent", "note")
declare function hostNote(key: usize, keyLen: i32, buf: usize, cap: i32): i32;
@external("wagent", "effects")
declare function hostEffects(ptr: usize, len: i32): i32;
@external("wagent", "log")
declare function hostLog(level: i32, ptr: usize, len: i32): i32;

/** Handler statuses. */
export const OK: i32 = 0;
export const ERROR: i32 = 1;

/** Log levels of Call.log. */
export const DEBUG: i32 = 0;
export const INFO: i32 = 1;
export const WARN: i32 = 2;
export const LOG_ERROR: i32 = 3;

/** The ABI marker: its name tells the host this module speaks ABI v1.
 * Re-export it from the op's entry file. */
export function wagent_abi_v1(): void {}

/** The runtime's abort, routed here by --use abort=…/wagent/abort: the
 * message goes to the host's log at error level, then the call traps. */
export function abort(message: string | null, fileName: string | null, line: u32, column: u32): void {
  if (message !== null) {
    const b = String.UTF8.encode(message);
    hostLog(LOG_ERROR, changetype<usize>(b), b.byteLength);
  }
  unreachable();
}

// ---- Reading JSON ------------------------------------------------------------

/** Raw is a JSON value as bytes of the document it came from (the view, a
 * message, a config), read on demand: field, items, str, int, bool. It is
 * valid during the call that read it. */
export class Raw {
  constructor(public ptr: usize, public len: i32) {}

  /** The JSON text of the value. */
  text(): string { return String.UTF8.decodeUnsafe(this.ptr, <usize>this.len); }

  first(): u8 { return this.len > 0 ? load<u8>(this.ptr) : 0; }
  isNull(): bool { return this.len == 4 && this.first() == 0x6E; }
  isString(): bool { return this.first() == 0x22; }

  /** The member key of an object (the last one, if it is there twice), or
   * null when this is not an object or has no such key. */
  field(key: string): Raw | null {
    if (this.first() != 0x7B) return null;
    const r = new Reader(this.ptr, this.ptr + <usize>this.len);
    let found: Raw | null = null;
    r.pos++;
    while (r.more(0x7D)) {
      r.key();
      r.colon();
      const v = r.value();
      if (r.keyEq(key)) found = v;
    }
    return found;
  }

  /** The items of an array (nothing when this is not one). */
  items(): Raw[] {
    const out = new Array<Raw>();
    if (this.first() != 0x5B) return out;
    const r = new Reader(this.ptr, this.ptr + <usize>this.len);
    r.pos++;
    while (r.more(0x5D)) out.push(r.value());
    return out;
  }

  /** The string this is ("" for null, or for anything but a string). */
  str(): string { return rawStr(this.ptr, this.len); }

  /** The strings of an array of strings, or null when this is not one
   * (null, an array of strings with nulls as "", is one). */
  strs(): string[] | null {
    const out = new Array<string>();
    if (this.isNull()) return out;
    if (this.first() != 0x5B) return null;
    const items = this.items();
    for (let i = 0; i < items.length; i++) {
      const it = items[i];
      if (!it.isString() && !it.isNull()) return null;
      out.push(it.str());
    }
    return out;
  }

  /** The integer this is (0 for anything else). */
  int(): i64 { return rawInt(this.ptr, this.len); }

  bool(): bool { return this.len == 4 && this.first() == 0x74; }
}

// The reader trusts the host: views and messages are JSON the host wrote,
// so it skips values without validating them. Its hot paths are inlined,
// keys are compared as bytes (not decoded into strings), and with SIMD
// (asc --enable simd) strings are scanned 16 bytes at a time.
class Reader {
  constructor(public pos: usize, public end: usize) {}

  /** The last key read: its bytes (kraw), or (escaped, not ASCII, not a
   * string) decoded in ks. */
  kp: usize = 0;
  kl: usize = 0;
  kraw: bool = false;
  ks: string = "";

  @inline ws(): void {
    while (this.pos < this.end) {
      const c = load<u8>(this.pos);
      if (c > 0x20 || (c != 0x20 && c != 0x09 && c != 0x0A && c != 0x0D)) return;
      this.pos++;
    }
  }

  /** more skips a separating comma and reports whether another item
   * comes before the closing bracket, which it consumes. */
  @inline more(close: u8): bool {
    this.ws();
    if (this.pos < this.end && load<u8>(this.pos) == 0x2C) { this.pos++; this.ws(); }
    if (this.pos >= this.end) return false;
    // Either closing bracket ends the container: a mismatched one (a
    // hostile tool call's arguments, {"a":1]) must not leave the reader
    // where no step moves it.
    const c = load<u8>(this.pos);
    if (c == close || c == 0x7D || c == 0x5D) { this.pos++; return false; }
    return true;
  }

  @inline colon(): void {
    this.ws();
    if (this.pos < this.end && load<u8>(this.pos) == 0x3A) this.pos++;
  }

  /** value returns the next value as Raw and moves past it. */
  value(): Raw {
    this.ws();
    const start = this.pos;
    this.skip();
    return new Raw(start, <i32>(this.pos - start));
  }

  skip(): void {
    let depth = 0;
    while (this.pos < this.end) {
      const c = load<u8>(this.pos);
      if (c == 0x22) {
        this.skipString();
      } else if (c == 0x7B || c == 0x5B) {
        depth++;
        this.pos++;
      } else if (c == 0x7D || c == 0x5D) {
        if (depth == 0) return;
        depth--;
        this.pos++;
      } else if (c == 0x2C || c == 0x3A || c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0D) {
        if (depth == 0) return;
        this.pos++;
      } else {
        this.pos++;
      }
      if (depth == 0 && (c == 0x22 || c == 0x7D || c == 0x5D)) return;
    }
  }

  /** skipString moves past the string at pos: an escape's backslash and
   * the byte after it are passed over (so an unterminated string ending
   * in a backslash leaves pos one past the end, as it always did). */
  @inline skipString(): void {
    let p = this.pos + 1;
    for (;;) {
      p = findQuoteOrBackslash(p, this.end);
      if (p >= this.end) break;
      if (load<u8>(p) == 0x22) { p++; break; }
      p += 2;
    }
    this.pos = p;
  }

  /** key reads a member's key as string does, without decoding it when
   * it is ASCII without escapes (then kp and kl are its bytes). */
  key(): void {
    this.ws();
    this.kraw = false;
    if (this.pos >= this.end || load<u8>(this.pos) != 0x22) {
      this.skip();
      this.ks = "";
      return;
    }
    const start = this.pos + 1;
    let p = start;
    let high: u8 = 0;
    while (p < this.end) {
      const c = load<u8>(p);
      if (c == 0x22 || c == 0x5C) break;
      high |= c;
      p++;
    }
    if (p < this.end && load<u8>(p) == 0x22 && high < 0x80) {
      this.kp = start;
      this.kl = p - start;
      this.kraw = true;
      this.pos = p + 1;
      return;
    }
    this.ks = this.string();
  }

  /** keyIs reports whether the last key is lit (ASCII). */
  @inline keyIs(lit: string): bool {
    if (!this.kraw) return this.ks == lit;
    const n = <usize>lit.length;
    if (this.kl != n) return false;
    const q = changetype<usize>(lit);
    for (let i: usize = 0; i < n; i++) {
      if (<u32>load<u8>(this.kp + i) != <u32>load<u16>(q + (i << 1))) return false;
    }
    return true;
  }

  /** keyEq reports whether the last key is key (any string). */
  keyEq(key: string): bool {
    if (!this.kraw) return this.ks == key;
    const n = <usize>key.length;
    if (this.kl != n) return false; // the key is ASCII: one byte a char
    const q = changetype<usize>(key);
    for (let i: usize = 0; i < n; i++) {
      if (<u32>load<u8>(this.kp + i) != <u32>load<u16>(q + (i << 1))) return false;
    }
    return true;
  }

  /** string decodes the string at pos (escapes undone) and moves past it. */
  string(): string {
    this.ws();
    if (this.pos >= this.end || load<u8>(this.pos) != 0x22) {
      this.skip();
      return "";
    }
    const v = decodeStringAt(this.pos, this.end);
    this.pos = stringEnd;
    return v;
  }

  /** val moves past the next value, noting where it is (vs, vl): the
   * v* methods read it as Raw's methods would, without making a Raw. */
  vs: usize = 0;
  vl: i32 = 0;
  @inline val(): void {
    this.ws();
    const start = this.pos;
    this.skip();
    this.vs = start;
    this.vl = <i32>(this.pos - start);
  }
  @inline vraw(): Raw { return new Raw(this.vs, this.vl); }
  @inline vstr(): string { return rawStr(this.vs, this.vl); }
  @inline vint(): i64 { return rawInt(this.vs, this.vl); }
  @inline vbool(): bool { return this.vl == 4 && load<u8>(this.vs) == 0x74; }
}

/** findQuoteOrBackslash returns the first '"' or '\\' in [p, end), or
 * end (or p, if p is past end). */
// @ts-ignore: decorator
@inline function findQuoteOrBackslash(p: usize, end: usize): usize {
  if (ASC_FEATURE_SIMD) {
    while (p < end && end - p >= 16) {
      const x = v128.load(p);
      const m = i8x16.bitmask(v128.or(i8x16.eq(x, i8x16.splat(0x22)), i8x16.eq(x, i8x16.splat(0x5C))));
      if (m != 0) return p + <usize>ctz(m);
      p += 16;
    }
  }
  while (p < end) {
    const c = load<u8>(p);
    if (c == 0x22 || c == 0x5C) break;
    p++;
  }
  return p;
}

let stringEnd: usize = 0;

/** decodeStringAt decodes the string whose opening quote is at q (escapes
 * undone) and sets stringEnd to where it ends. */
function decodeStringAt(q: usize, end: usize): string {
  const start = q + 1;
  let p = findQuoteOrBackslash(start, end);
  if (p < end && load<u8>(p) == 0x22) {
    stringEnd = p + 1;
    return String.UTF8.decodeUnsafe(start, p - start);
  }
  // Escapes: undo them into a buffer, then decode it.
  const buf = heap.alloc(end - start);
  let o = buf;
  p = start;
  while (p < end) {
    const c = load<u8>(p);
    if (c == 0x22) break;
    if (c != 0x5C) { store<u8>(o++, c); p++; continue; }
    const e = load<u8>(p + 1);
    p += 2;
    if (e == 0x6E) store<u8>(o++, 0x0A);
    else if (e == 0x74) store<u8>(o++, 0x09);
    else if (e == 0x72) store<u8>(o++, 0x0D);
    else if (e == 0x62) store<u8>(o++, 0x08);
    else if (e == 0x66) store<u8>(o++, 0x0C);
    else if (e == 0x75) {
      let r = hex4(p);
      p += 4;
      if (r >= 0xD800 && r < 0xDC00 && p + 6 <= end && load<u8>(p) == 0x5C && load<u8>(p + 1) == 0x75) {
        const lo = hex4(p + 2);
        if (lo >= 0xDC00 && lo < 0xE000) {
          r = 0x10000 + ((r - 0xD800) << 10) + (lo - 0xDC00);
          p += 6;
        } else {
          r = 0xFFFD;
        }
      } else if (r >= 0xD800 && r < 0xE000) {
        r = 0xFFFD;
      }
      o = putRune(o, r);
    } else store<u8>(o++, e);
  }
  stringEnd = p + 1;
  return String.UTF8.decodeUnsafe(buf, o - buf);
}

function rawInt(ptr: usize, len: i32): i64 {
  let p = ptr;
  const end = p + <usize>len;
  let neg = false;
  if (p < end && load<u8>(p) == 0x2D) { neg = true; p++; }
  let v: i64 = 0;
  while (p < end) {
    const c = load<u8>(p);
    if (c < 0x30 || c > 0x39) break;
    v = v * 10 + <i64>(c - 0x30);
    p++;
  }
  return neg ? -v : v;
}

/** rawStr is Raw.str. */
function rawStr(ptr: usize, len: i32): string {
  if (len <= 0 || load<u8>(ptr) != 0x22) return "";
  const v = decodeStringAt(ptr, ptr + <usize>len);
  return v;
}

function hex4(p: usize): u32 {
  let v: u32 = 0;
  for (let i: usize = 0; i < 4; i++) {
    const c = <u32>load<u8>(p + i);
    v <<= 4;
    if (c >= 0x30 && c <= 0x39) v |= c - 0x30;
    else if (c >= 0x61 && c <= 0x66) v |= c - 0x61 + 10;
    else if (c >= 0x41 && c <= 0x46) v |= c - 0x41 + 10;
  }
  return v;
}

function putRune(o: usize, r: u32): usize {
  if (r < 0x80) { store<u8>(o, r); return o + 1; }
  if (r < 0x800) { store<u8>(o, 0xC0 | r >> 6); store<u8>(o + 1, 0x80 | (r & 0x3F)); return o + 2; }
  if (r < 0x10000) {
    store<u8>(o, 0xE0 | r >> 12); store<u8>(o + 1, 0x80 | (r >> 6 & 0x3F)); store<u8>(o + 2, 0x80 | (r & 0x3F));
    return o + 3;
  }
  store<u8>(o, 0xF0 | r >> 18); store<u8>(o + 1, 0x80 | (r >> 12 & 0x3F));
  store<u8>(o + 2, 0x80 | (r >> 6 & 0x3F)); store<u8>(o + 3, 0x80 | (r & 0x3F));
  return o + 4;
}

// ---- The view ------------------------------------------------------------------

/** A tool call without a result (the tool hook's view). */
export class PendingCall {
  id: string = "";
  name: string = "";
  /** The call's arguments as JSON, as the model wrote them. */
  arguments: Raw = new Raw(0, 0);
  /** The op that contributed the tool ("" if none did). */
  owner: string = "";
  server: string = "";
  /** "allow" once an approval decision allowed the call. */
  decision: string = "";
  /** True while an approval request for the call is open. */
  requested: bool = false;
  /** True once tool/call was recorded for it. */
  started: bool = false;
  /** The tool's annotations as JSON, or null. */
  annotations: Raw | null = null;
}

/** The tool hook's view: the pending calls; run names the call the host
 * asks its owner to run ("" otherwise). */
export class ToolView {
  calls: PendingCall[] = [];
  offered: string[] = [];
  run: string = "";
}

/** The answer that would end the turn (turn-stopping). */
export class StopView {
  content: string = "";
  finishReason: string = "";
}

/** The failed model request (request-error). */
export class FailureView {
  code: string = "";
  status: i64 = 0;
  retryAfterMs: i64 = 0;
  message: string = "";
  attempt: i64 = 0;
  retries: i64 = 0;
}

/** A slash command addressed to the op (command). */
export class CommandView {
  name: string = "";
  args: string = "";
}

/** One message of a claimed batch (prompt), and of a rewrite. */
export class InputMessage {
  constructor(public id: string = "", public content: string = "") {}
}

/** Why the host asks about shortening the conversation (compact). */
export class CompactView {
  reason: string = "";
  instruction: string = "";
  model: string = "";
  tokens: i64 = 0;
  summarized: i64 = 0;
}

/** The view of a call (ABI.md §4). Keys the kit does not know are
 * skipped; raw holds the whole document for anything else. */
export class View {
  hook: string = "";
  session: string = "";
  op: string = "";
  turn: i64 = 0;
  step: i64 = 0;
  /** How many conversation messages exist; read them with Call.message. */
  messages: i64 = 0;
  /** The op's config from the pipeline (null when there is none). */
  config: Raw | null = null;
  prompt: InputMessage[] | null = null;
  tool: ToolView | null = null;
  failure: FailureView | null = null;
  stop: StopView | null = null;
  command: CommandView | null = null;
  compact: CompactView | null = null;
  raw: Raw = new Raw(0, 0);
}

function parseView(doc: Raw): View {
  const v = new View();
  v.raw = doc;
  if (doc.first() != 0x7B) return v;
  const r = new Reader(doc.ptr, doc.ptr + <usize>doc.len);
  r.pos++;
  while (r.more(0x7D)) {
    r.key();
    r.colon();
    r.val();
    if (r.keyIs("hook")) v.hook = r.vstr();
    else if (r.keyIs("session")) v.session = r.vstr();
    else if (r.keyIs("op")) v.op = r.vstr();
    else if (r.keyIs("turn")) v.turn = r.vint();
    else if (r.keyIs("step")) v.step = r.vint();
    else if (r.keyIs("messages")) v.messages = r.vint();
    else if (r.keyIs("config")) v.config = r.vraw();
    else if (r.keyIs("tool")) v.tool = parseTool(r.vraw());
    else if (r.keyIs("stop")) {
      const val = r.vraw();
      const s = new StopView();
      const c = val.field("content"), f = val.field("finish_reason");
      if (c !== null) s.content = c.str();
      if (f !== null) s.finishReason = f.str();
      v.stop = s;
    } else if (r.keyIs("failure")) v.failure = parseFailure(r.vraw());
    else if (r.keyIs("command")) {
      const val = r.vraw();
      const c = new CommandView();
      const n = val.field("name"), a = val.field("args");
      if (n !== null) c.name = n.str();
      if (a !== null) c.args = a.str();
      v.command = c;
    } else if (r.keyIs("prompt")) {
      const val = r.vraw();
      const batch = new Array<InputMessage>();
      const b = val.field("batch");
      if (b !== null) {
        const items = b.items();
        for (let i = 0; i < items.length; i++) {
          const id = items[i].field("id"), content = items[i].field("content");
          batch.push(new InputMessage(id !== null ? id.str() : "", content !== null ? content.str() : ""));
        }
      }
      v.prompt = batch;
    } else if (r.keyIs("compact")) {
      const val = r.vraw();
      const c = new CompactView();
      const a = val.field("reason"), b = val.field("instruction"), m = val.field("model"), t = val.field("tokens"), s = val.field("summarized");
      if (a !== null) c.reason = a.str();
      if (b !== null) c.instruction = b.str();
      if (m !== null) c.model = m.str();
      if (t !== null) c.tokens = t.int();
      if (s !== null) c.summarized = s.int();
      v.compact = c;
    }
    // anything else: a key of a later minor, skipped
  }
  return v;
}

function parseTool(val: Raw): ToolView {
  const t = new ToolView();
  const r = new Reader(val.ptr, val.ptr + <usize>val.len);
  if (val.first() != 0x7B) return t;
  r.pos++;
  while (r.more(0x7D)) {
    r.key();
    r.colon();
    r.val();
    if (r.keyIs("run")) t.run = r.vstr();
    else if (r.keyIs("offered")) { const s = r.vraw().strs(); if (s !== null) t.offered = s; }
    else if (r.keyIs("calls")) {
      // items(), without the array of them
      if (r.vl > 0 && load<u8>(r.vs) == 0x5B) {
        const ir = new Reader(r.vs, r.vs + <usize>r.vl);
        ir.pos++;
        while (ir.more(0x5D)) {
          ir.val();
          t.calls.push(parseCall(ir.vs, ir.vl));
        }
      }
    }
  }
  return t;
}

function parseCall(ptr: usize, len: i32): PendingCall {
  const c = new PendingCall();
  if (len <= 0 || load<u8>(ptr) != 0x7B) return c;
  const r = new Reader(ptr, ptr + <usize>len);
  r.pos++;
  while (r.more(0x7D)) {
    r.key();
    r.colon();
    r.val();
    if (r.keyIs("id")) c.id = r.vstr();
    else if (r.keyIs("name")) c.name = r.vstr();
    else if (r.keyIs("arguments")) c.arguments = r.vraw();
    else if (r.keyIs("owner")) c.owner = r.vstr();
    else if (r.keyIs("server")) c.server = r.vstr();
    else if (r.keyIs("decision")) c.decision = r.vstr();
    else if (r.keyIs("requested")) c.requested = r.vbool();
    else if (r.keyIs("started")) c.started = r.vbool();
    else if (r.keyIs("annotations")) c.annotations = r.vraw();
  }
  return c;
}

function parseFailure(val: Raw): FailureView {
  const f = new FailureView();
  const a = val.field("attempt"), rt = val.field("retries"), fl = val.field("failure");
  if (a !== null) f.attempt = a.int();
  if (rt !== null) f.retries = rt.int();
  if (fl !== null) {
    const c = fl.field("code"), s = fl.field("status"), ra = fl.field("retry_after_ms"), m = fl.field("message");
    if (c !== null) f.code = c.str();
    if (s !== null) f.status = s.int();
    if (ra !== null) f.retryAfterMs = ra.int();
    if (m !== null) f.message = m.str();
  }
  return f;
}

/** One conversation message, read on demand with Call.message. */
export class Message {
  role: string = "";
  id: string = "";
  content: string = "";
  /** The calls of an assistant message, as JSON (null when none). */
  toolCalls: Raw | null = null;
  /** For role "tool": the call answered and whether it failed. */
  callId: string = "";
  isError: bool = false;
}

// ---- Writing effects ------------------------------------------------------------

/** Out builds the effects document: a JSON array, one object per effect. */
class Out {
  ptr: usize = 0;
  len: usize = 0;
  cap: usize = 0;
  count: i32 = 0;

  @inline room(n: usize): void {
    if (this.len + n > this.cap) this.grow(n);
  }

  grow(n: usize): void {
    let cap = this.cap * 2;
    if (cap < this.len + n) cap = this.len + n;
    if (cap < 1024) cap = 1024;
    const p = heap.alloc(cap);
    if (this.len > 0) memory.copy(p, this.ptr, this.len);
    this.ptr = p;
    this.cap = cap;
  }

  byte(c: u8): void {
    this.room(1);
    store<u8>(this.ptr + this.len, c);
    this.len++;
  }

  ascii(s: string): void {
    const n = <usize>s.length;
    this.room(n);
    const q = changetype<usize>(s), o = this.ptr + this.len;
    for (let i: usize = 0; i < n; i++) store<u8>(o + i, <u8>load<u16>(q + (i << 1)));
    this.len += n;
  }

  /** quote writes s as a JSON string, in UTF-8 (a lone surrogate as U+FFFD). */
  quote(s: string): void {
    this.room(<usize>s.length * 6 + 2);
    let o = this.ptr + this.len;
    store<u8>(o++, 0x22);
    const q = changetype<usize>(s), n = s.length;
    for (let i = 0; i < n; i++) {
      let c = <u32>load<u16>(q + (<usize>i << 1));
      if (c >= 0x20 && c < 0x80 && c != 0x22 && c != 0x5C) { store<u8>(o++, c); continue; }
      if (c == 0x22 || c == 0x5C) { store<u8>(o++, 0x5C); store<u8>(o++, c); continue; }
      if (c < 0x20) {
        store<u8>(o++, 0x5C);
        if (c == 0x0A) store<u8>(o++, 0x6E);
        else if (c == 0x09) store<u8>(o++, 0x74);
        else if (c == 0x0D) store<u8>(o++, 0x72);
        else {
          store<u8>(o++, 0x75); store<u8>(o++, 0x30); store<u8>(o++, 0x30);
          store<u8>(o++, <u8>HEX.charCodeAt(c >> 4)); store<u8>(o++, <u8>HEX.charCodeAt(c & 15));
        }
        continue;
      }
      if (c >= 0xD800 && c < 0xE000) {
        const d = i + 1 < n ? <u32>load<u16>(q + (<usize>(i + 1) << 1)) : 0;
        if (c < 0xDC00 && d >= 0xDC00 && d < 0xE000) {
          c = 0x10000 + ((c - 0xD800) << 10) + (d - 0xDC00);
          i++;
        } else {
          c = 0xFFFD;
        }
      }
      o = putRune(o, c);
    }
    store<u8>(o++, 0x22);
    this.len = o - this.ptr;
  }

  begin(kind: string): void {
    this.ascii(this.count == 0 ? '[{"kind":' : ',{"kind":');
    this.count++;
    this.quote(kind);
  }

  key(k: string): void {
    this.byte(0x2C);
    this.quote(k);
    this.byte(0x3A);
  }

  str(k: string, v: string): void { this.key(k); this.quote(v); }
  end(): void { this.byte(0x7D); }
}

const HEX = "0123456789abcdef";

// ---- A call ------------------------------------------------------------------------

/** Call is one hook call: the view, on-demand reads, and the answer. The
 * effect methods add to the answer, which handle hands to the host when
 * the handler returns OK; the host checks each effect at the hook it was
 * given for (a kind the hook does not take faults the call). */
export class Call {
  view: View;
  out: Out = new Out();

  constructor(view: View) { this.view = view; }

  /** message reads conversation message i (0 is the oldest), or null when
   * there is none. */
  message(i: i64): Message | null {
    if (i < 0 || i >= this.view.messages) return null;
    const doc = read(0, <i32>i, "");
    if (doc === null) return null;
    const m = new Message();
    if (doc.first() != 0x7B) return m;
    const r = new Reader(doc.ptr, doc.ptr + <usize>doc.len);
    r.pos++;
    while (r.more(0x7D)) {
      r.key();
      r.colon();
      r.val();
      if (r.keyIs("role")) m.role = r.vstr();
      else if (r.keyIs("id")) m.id = r.vstr();
      else if (r.keyIs("content")) m.content = r.vstr();
      else if (r.keyIs("tool_calls")) m.toolCalls = r.vraw();
      else if (r.keyIs("call_id")) m.callId = r.vstr();
      else if (r.keyIs("is_error")) m.isError = r.vbool();
    }
    return m;
  }

  /** note reads the op's note key, or null when there is none. */
  note(key: string): string | null {
    const doc = read(1, 0, key);
    if (doc === null) return null;
    return String.UTF8.decodeUnsafe(doc.ptr, <usize>doc.len);
  }

  /** log writes a line to the host's diagnostic log (not an effect). */
  log(level: i32, text: string): void {
    const b = String.UTF8.encode(text);
    hostLog(level, changetype<usize>(b), b.byteLength);
  }

  /** fail logs why at the error level and returns ERROR: return
   * c.fail("…") from a handler to fail the call (nothing of the answer is
   * applied). */
  fail(why: string): i32 {
    this.log(LOG_ERROR, why);
    return ERROR;
  }

  private text(kind: string, text: string): void {
    this.out.begin(kind);
    if (text.length > 0) this.out.str("text", text);
    this.out.end();
  }

  /** setNote: the op's durable memory under key (any hook). */
  setNote(key: string, value: string): void {
    this.out.begin("note");
    this.out.str("key", key);
    if (value.length > 0) this.out.str("value", value);
    this.out.end();
  }
  /** liveLog: a line watchers of the session see (not durable). */
  liveLog(level: string, text: string): void {
    this.out.begin("log");
    if (level.length > 0) this.out.str("level", level);
    this.out.str("text", text);
    this.out.end();
  }
  // prompt
  admit(): void { this.text("admit", ""); }
  reject(why: string): void { this.text("reject", why); }
  /** rewrite lets the batch in with new content (the same ids). */
  rewrite(batch: InputMessage[]): void {
    this.out.begin("rewrite");
    this.out.key("messages");
    this.out.byte(0x5B);
    for (let i = 0; i < batch.length; i++) {
      if (i > 0) this.out.byte(0x2C);
      this.out.ascii("{");
      this.out.quote("id");
      this.out.byte(0x3A);
      this.out.quote(batch[i].id);
      this.out.str("content", batch[i].content);
      this.out.end();
    }
    this.out.byte(0x5D);
    this.out.end();
  }
  // contribute
  /** offerTool offers a tool the op owns; parameters is a JSON Schema as
   * text ("" for none). */
  offerTool(name: string, description: string, parameters: string): void {
    this.out.begin("tool");
    this.out.key("tool");
    this.out.ascii('{"name":');
    this.out.quote(name);
    if (description.length > 0) this.out.str("description", description);
    if (parameters.length > 0) { this.out.key("parameters"); this.raw(parameters); }
    this.out.end();
    this.out.end();
  }
  promptPart(text: string): void { this.text("prompt_part", text); }
  topOfMind(text: string): void { this.text("top_of_mind", text); }
  endTurn(why: string): void { this.text("end_turn", why); }
  // compact
  compact(instructions: string): void { this.text("compact", instructions); }
  // tool: guards decide and ask; an owner answers the call view.tool.run
  // names; other ops answer calls no op owns.
  private decision(callId: string, allow: bool, scope: string, why: string): void {
    this.out.begin("decision");
    this.out.str("call_id", callId);
    if (allow) this.out.ascii(',"allow":true');
    this.out.str("scope", scope);
    if (why.length > 0) this.out.str("text", why);
    this.out.end();
  }
  /** decide allows or denies a call, this once (guards only). */
  decide(callId: string, allow: bool, why: string): void { this.decision(callId, allow, "once", why); }
  /** decideAlways decides with scope "always" (guards only). */
  decideAlways(callId: string, allow: bool, why: string): void { this.decision(callId, allow, "always", why); }
  /** askApproval asks a person to decide calls (guards only). */
  askApproval(why: string, callIds: string[]): void {
    this.out.begin("approval_request");
    this.out.key("call_ids");
    this.out.byte(0x5B);
    for (let i = 0; i < callIds.length; i++) {
      if (i > 0) this.out.byte(0x2C);
      this.out.quote(callIds[i]);
    }
    this.out.byte(0x5D);
    if (why.length > 0) this.out.str("text", why);
    this.out.end();
  }
  /** result answers a call. */
  result(callId: string, content: string, isError: bool = false, code: string = "", concludesTurn: bool = false): void {
    this.out.begin("result");
    this.out.str("call_id", callId);
    if (content.length > 0) this.out.str("content", content);
    if (isError) this.out.ascii(',"is_error":true');
    if (code.length > 0) this.out.str("code", code);
    if (concludesTurn) this.out.ascii(',"concludes_turn":true');
    this.out.end();
  }
  // request-error
  /** retry asks for the failed request again after delayMs (0 to a day). */
  retry(delayMs: i64): void {
    this.out.begin("retry");
    if (delayMs != 0) { this.out.key("delay_ms"); this.out.ascii(delayMs.toString()); }
    this.out.end();
  }
  // turn-stopping
  steer(text: string): void { this.text("steer", text); }
  // command
  reply(text: string): void { this.text("reply", text); }

  private raw(json: string): void {
    const b = String.UTF8.encode(json);
    this.out.room(<usize>b.byteLength);
    memory.copy(this.out.ptr + this.out.len, changetype<usize>(b), <usize>b.byteLength);
    this.out.len += <usize>b.byteLength;
  }
}

/** read calls a host read (0: message, 1: note) into a heap buffer, and
 * again with a larger one when the first did not fit. */
function read(kind: i32, index: i32, key: string): Raw | null {
  let cap: i32 = 4096;
  let buf = heap.alloc(<usize>cap);
  let k: usize = 0, klen: i32 = 0;
  if (kind == 1) {
    const kb = String.UTF8.encode(key);
    k = changetype<usize>(kb);
    klen = kb.byteLength;
  }
  for (let tries = 0; tries < 2; tries++) {
    const n = kind == 0 ? hostMessage(index, buf, cap) : hostNote(k, klen, buf, cap);
    if (n < 0) return null;
    if (n <= cap) return new Raw(buf, n);
    cap = n;
    buf = heap.alloc(<usize>cap);
  }
  return null;
}

/** handle runs one hook call: it resets the heap (nothing survives from
 * the last call), reads and decodes the view, runs fn and hands its
 * answer to the host. fn returns OK, or c.fail("why"). */
export function handle(viewLen: i32, fn: (c: Call) => i32): i32 {
  heap.reset();
  const cap = viewLen > 0 ? viewLen : 1;
  let buf = heap.alloc(<usize>cap);
  let n = hostView(buf, cap);
  if (n > cap) {
    buf = heap.alloc(<usize>n);
    n = hostView(buf, n);
  }
  const c = new Call(parseView(new Raw(buf, n)));
  if (fn(c) != OK) return ERROR;
  if (c.out.count > 0) {
    c.out.byte(0x5D);
    hostEffects(c.out.ptr, <i32>c.out.len);
  }
  return OK;
}
