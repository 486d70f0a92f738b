// policy: the Go policy example (guests/examples/policy) in
// AssemblyScript, with the kit guests/assemblyscript/wagent.ts. It has two
// hooks, and answers exactly as the Go op does:
//
//   - tool: an allow-list approval. Calls to tools on the config's allow
//     list are allowed, calls on its deny list are denied, calls to a tool
//     a person allowed "always" (remembered in the note "always:TOOL") are
//     allowed, and anything else is put to a person.
//   - turn-stopping: a stop check. When the last user message asked a
//     question and the model's answer is empty, it steers the turn on once
//     (remembering in the note "steered" that it did), reading only the
//     last eight messages however long the conversation is.
//
// Config: {"allow": ["calc_total"], "deny": ["rm"]}.

import { Call, handle, OK } from "../../../guests/assemblyscript/wagent";
export { wagent_abi_v1 } from "../../../guests/assemblyscript/wagent";

export function wagent_on_tool(viewLen: i32): i32 {
  return handle(viewLen, decide);
}

export function wagent_on_turn_stopping(viewLen: i32): i32 {
  return handle(viewLen, stopCheck);
}

function list(c: Call, key: string): string[] | null {
  const cfg = c.view.config;
  if (cfg === null) return [];
  const raw = cfg.field(key);
  if (raw === null) return [];
  return raw.strs();
}

function decide(c: Call): i32 {
  const allow = list(c, "allow");
  if (allow === null) return c.fail("config: allow is not a list of strings");
  const deny = list(c, "deny");
  if (deny === null) return c.fail("config: deny is not a list of strings");
  const tool = c.view.tool;
  if (tool === null) return OK;
  const ask = new Array<string>();
  for (let i = 0; i < tool.calls.length; i++) {
    const call = tool.calls[i];
    if (call.decision != "" || call.requested) continue;
    if (allow.includes(call.name)) {
      c.decide(call.id, true, "on the allow list");
    } else if (deny.includes(call.name)) {
      c.decide(call.id, false, "on the deny list");
    } else {
      const v = c.note("always:" + call.name);
      if (v !== null && v == "allow") {
        c.decide(call.id, true, "allowed always");
        continue;
      }
      ask.push(call.id);
    }
  }
  if (ask.length > 0) c.askApproval("not on the allow list", ask);
  return OK;
}

// isSpace is Go's unicode.IsSpace, so that "empty" means what
// strings.TrimSpace means.
function isSpace(r: u32): bool {
  if (r == 0x09 || r == 0x0A || r == 0x0B || r == 0x0C || r == 0x0D || r == 0x20) return true;
  if (r == 0x85 || r == 0xA0 || r == 0x1680 || r == 0x2028 || r == 0x2029 || r == 0x202F || r == 0x205F || r == 0x3000) return true;
  return r >= 0x2000 && r <= 0x200A;
}

function blank(s: string): bool {
  for (let i = 0; i < s.length; i++) {
    if (!isSpace(<u32>s.charCodeAt(i))) return false; // surrogates are no spaces
  }
  return true;
}

function stopCheck(c: Call): i32 {
  const turn = c.view.turn.toString();
  const steered = c.note("steered");
  if (steered !== null && steered == turn) return OK; // once per turn
  const stop = c.view.stop;
  if (stop === null || !blank(stop.content)) return OK;
  // The last user message, looking back a few messages at most.
  const n = c.view.messages;
  for (let i = n - 1; i >= 0 && i >= n - 8; i--) {
    const m = c.message(i);
    if (m === null) break;
    if (m.role == "user") {
      if (m.content.includes("?")) {
        c.setNote("steered", turn);
        c.steer("The user asked a question; answer it.");
      }
      break;
    }
  }
  return OK;
}
