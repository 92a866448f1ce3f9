// One pending interaction as a card: the exact payload that will run, its hash (checked
// again in the browser), time left, and the decisions — with the API's answer shown at once.

import { api, ApiError } from "./api.js";
import { h, replace, fmtLeft, fmtTime } from "./dom.js";
import { grantPicker } from "./grants.js";

/** Python's `json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False)`. */
export function canonicalJson(value) {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value && typeof value === "object") {
    return `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonicalJson(value[k])}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

async function sha256Hex(text) {
  if (!globalThis.crypto?.subtle) return null; // only in secure contexts (https, localhost)
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

const OUTCOME = {
  200: "accepted",
  403: "not allowed",
  404: "not found",
  409: "already decided or expired",
  422: "refused",
};

/** A card for an interaction (`InteractionPublic`, or the data of `interaction_pending`). */
export function decisionCard(ia, { showRun = true, onDecided } = {}) {
  if (ia.kind === "local_tool_result") return clientCallCard(ia, { showRun });
  if (ia.kind === "secret_ref") return secretCard(ia, { showRun, onDecided });
  // What Keel hashes (workflows/gate.py): the tool and its canonical arguments as a string.
  const payload = canonicalJson({ tool: ia.tool, arguments: canonicalJson(ia.arguments) });
  const check = h("span", { class: "hash-check muted" }, "checking…");
  sha256Hex(payload).then((hex) => {
    if (hex === null) replace(check, "not re-checked here (the browser needs https for SHA-256)");
    else if (hex === ia.payload_hash) { check.className = "hash-check ok"; replace(check, "✓ matches the payload above"); }
    else { check.className = "hash-check error"; replace(check, "✗ does not match the payload above"); }
  });
  const left = h("span", { class: "time-left" }, fmtLeft(ia.expires_at));
  const timer = setInterval(() => {
    if (!left.isConnected) { clearInterval(timer); return; }
    replace(left, fmtLeft(ia.expires_at));
  }, 1000);
  const result = h("div", { class: "decision-result", "aria-live": "polite" });
  const reason = h("textarea", { class: "reason", rows: 2, placeholder: ia.kind === "ask_user" ? "Your answer" : "Reason (the model is told)" });
  const buttons = h("div", { class: "buttons" });
  // Approve with edits: the arguments are editable; what changed is shown before it is sent.
  const editor = h("textarea", { class: "edit-arguments", rows: 6, spellcheck: "false", "aria-label": "Arguments to approve" });
  editor.value = JSON.stringify(ia.arguments, null, 2);
  const diff = h("div", { class: "edit-diff", "aria-live": "polite" });
  /** The edited arguments; undefined when as proposed, null when not a JSON object. */
  function edited() {
    let value;
    try { value = JSON.parse(editor.value); } catch { return null; }
    if (!value || typeof value !== "object" || Array.isArray(value)) return null;
    return canonicalJson(value) === canonicalJson(ia.arguments) ? undefined : value;
  }
  function showDiff() {
    const value = edited();
    if (value === null) replace(diff, h("span", { class: "error" }, "Not a JSON object of arguments."));
    else if (value === undefined) replace(diff);
    else replace(diff, h("div", { class: "label" }, "Your changes (the edited call is what runs)"),
      h("ul", {}, argumentChanges(ia.arguments, value).map(([kind, text]) => h("li", { class: `change ${kind}` }, text))));
  }
  editor.addEventListener("input", showDiff);

  async function decide(decision) {
    const body = { decision };
    if (decision.startsWith("approve")) body.payload_hash = ia.payload_hash;
    if (decision.startsWith("approve") && ia.kind !== "ask_user") {
      const value = edited();
      if (value === null) {
        replace(result, h("span", { class: "error" }, "The edited arguments are not a JSON object."));
        return;
      }
      if (value !== undefined) body.arguments = value;
    }
    if (decision === "approve_always" && picker) {
      const grant = picker.scope();
      if (typeof grant === "string") { replace(result, h("span", { class: "error" }, grant)); return; }
      if (grant) body.grant = grant;
    }
    if (reason.value.trim()) body.text = reason.value.trim();
    if (decision === "answer" && !body.text) {
      replace(result, h("span", { class: "error" }, "Write the answer first."));
      return;
    }
    for (const b of buttons.querySelectorAll("button")) b.disabled = true;
    try {
      const answer = await api("POST", `/v1/runs/${encodeURIComponent(ia.run_id)}/interactions/${encodeURIComponent(ia.id)}`, body);
      result.dataset.outcome = "accepted";
      replace(result, h("strong", { class: "ok" }, "Accepted"), ` — ${answer.interaction.decision} by ${answer.interaction.decided_by}`,
        answer.interaction.approved_hash ? ` with changes (runs ${answer.interaction.approved_hash.slice(0, 12)}…)` : "",
        answer.grant ? h("span", { class: "grant-made" }, ` · grant ${answer.grant.kind} ${answer.grant.permission} ${answer.grant.pattern}`) : "");
      card.dataset.status = "decided";
      onDecided?.(answer);
    } catch (err) {
      const status = err instanceof ApiError ? err.status : 0;
      result.dataset.outcome = OUTCOME[status] || "error";
      replace(result, h("strong", { class: "error" }, `${status || ""} ${OUTCOME[status] || "error"}`), ": ", err.detail || String(err));
      for (const b of buttons.querySelectorAll("button")) b.disabled = false;
    }
  }

  const picker = ia.kind === "ask_user" || ia.status !== "pending" ? null : grantPicker(ia);
  if (ia.kind === "ask_user") {
    append(buttons, h("button", { class: "answer", onclick: () => decide("answer") }, "Answer"),
      h("button", { class: "reject danger", onclick: () => decide("reject") }, "Decline"));
  } else {
    append(buttons,
      h("button", { class: "approve", onclick: () => decide("approve") }, "Approve"),
      h("button", { class: "approve-always", onclick: () => decide("approve_always") }, "Approve always"),
      h("button", { class: "reject danger", onclick: () => decide("reject") }, "Reject"));
  }

  const card = h("article", { class: "card interaction", dataset: { interactionId: ia.id, runId: ia.run_id, status: ia.status } },
    h("header", {},
      h("strong", {}, ia.kind === "ask_user" ? "Question" : `${ia.tool}`),
      ia.risk ? h("span", { class: `badge risk-${ia.risk}` }, ia.risk) : null,
      showRun ? h("a", { href: `/console/runs/${encodeURIComponent(ia.run_id)}` }, ia.run_id) : null,
      left),
    ia.question ? h("p", { class: "question" }, ia.question) : null,
    ia.subject ? h("p", { class: "muted" }, "subject: ", h("code", {}, ia.subject)) : null,
    h("div", { class: "muted small" }, `asked ${fmtTime(ia.created_at)}`, ia.requester ? ` by ${ia.requester}` : "",
      ia.approvers?.length ? ` · approvers: ${ia.approvers.join(", ")}` : ""),
    ia.kind === "ask_user" ? null : h("div", {},
      h("div", { class: "label" }, "Arguments"),
      h("pre", { class: "arguments" }, JSON.stringify(ia.arguments, null, 2)),
      h("div", { class: "label" }, "Exact payload that will run (canonical JSON, as hashed)"),
      h("pre", { class: "payload" }, payload),
      h("div", { class: "label" }, "SHA-256 ", check),
      h("code", { class: "payload-hash" }, ia.payload_hash),
      ia.status === "pending" ? h("details", { class: "edit" },
        h("summary", {}, "Edit the arguments before approving"),
        editor, diff) : null,
      ia.approved_arguments ? [
        h("div", { class: "label" }, `Approved with changes by ${ia.decided_by || "the approver"} (this ran)`),
        h("ul", { class: "edit-diff" }, argumentChanges(ia.arguments, ia.approved_arguments).map(([kind, text]) => h("li", { class: `change ${kind}` }, text))),
        h("code", { class: "approved-hash" }, ia.approved_hash || "")] : null),
    ia.status === "pending" ? [picker?.element, reason, buttons] : h("p", { class: "muted" }, `${ia.status}${ia.decision ? `: ${ia.decision}` : ""}`),
    result);
  return card;
}

/** A secret the run asks for: a password field; the value goes to the API and is cleared. */
function secretCard(ia, { showRun, onDecided }) {
  const result = h("div", { class: "decision-result", "aria-live": "polite" });
  const field = h("input", { type: "password", class: "secret", autocomplete: "off", "aria-label": "Secret" });
  const buttons = h("div", { class: "buttons" });
  async function decide(decision) {
    const body = { decision };
    if (decision === "answer") {
      if (!field.value) { replace(result, h("span", { class: "error" }, "Type the secret first.")); return; }
      body.secret = field.value;
    }
    field.value = ""; // kept nowhere in the page once sent
    for (const b of buttons.querySelectorAll("button")) b.disabled = true;
    try {
      const answer = await api("POST", `/v1/runs/${encodeURIComponent(ia.run_id)}/interactions/${encodeURIComponent(ia.id)}`, body);
      result.dataset.outcome = "accepted";
      replace(result, h("strong", { class: "ok" }, "Accepted"), ` — ${answer.interaction.decision} by ${answer.interaction.decided_by}`);
      card.dataset.status = "decided";
      field.remove();
      onDecided?.(answer);
    } catch (err) {
      const status = err instanceof ApiError ? err.status : 0;
      result.dataset.outcome = OUTCOME[status] || "error";
      replace(result, h("strong", { class: "error" }, `${status || ""} ${OUTCOME[status] || "error"}`), ": ", err.detail || String(err));
      for (const b of buttons.querySelectorAll("button")) b.disabled = false;
    }
  }
  append(buttons, h("button", { class: "give-secret", onclick: () => decide("answer") }, "Give secret"),
    h("button", { class: "reject danger", onclick: () => decide("reject") }, "Decline"));
  const card = h("article", { class: "card interaction secret-request", dataset: { interactionId: ia.id, runId: ia.run_id, status: ia.status, kind: ia.kind } },
    h("header", {},
      h("strong", {}, "Secret requested"),
      h("span", { class: "badge" }, ia.tool),
      showRun ? h("a", { href: `/console/runs/${encodeURIComponent(ia.run_id)}` }, ia.run_id) : null),
    ia.question ? h("p", { class: "question" }, ia.question) : null,
    h("p", { class: "muted small" }, "Kept sealed by Keel and handed to the tool by reference; the agent never sees it."),
    ia.status === "pending" ? [field, buttons] : h("p", { class: "muted" }, `${ia.status}`),
    result);
  return card;
}

/** A call the client that started the run executes: shown, never decided here. */
function clientCallCard(ia, { showRun }) {
  const client = ia.requester || ia.approvers?.[0];
  const left = h("span", { class: "time-left" }, fmtLeft(ia.expires_at));
  const timer = setInterval(() => {
    if (!left.isConnected) { clearInterval(timer); return; }
    replace(left, fmtLeft(ia.expires_at));
  }, 1000);
  return h("article", { class: "card interaction client-call", dataset: { interactionId: ia.id, runId: ia.run_id, status: ia.status, kind: ia.kind } },
    h("header", {},
      h("strong", {}, `${ia.tool}`),
      h("span", { class: "badge client" }, "client tool"),
      showRun ? h("a", { href: `/console/runs/${encodeURIComponent(ia.run_id)}` }, ia.run_id) : null,
      ia.status === "pending" ? left : null),
    h("p", { class: "client-note" }, "Answered by the client that started the run",
      client ? ` (${client})` : "",
      ": it runs this call on its own files and sends the output. Nothing to decide here."),
    ia.subject ? h("p", { class: "muted" }, "subject: ", h("code", {}, ia.subject)) : null,
    h("div", { class: "muted small" }, `asked ${fmtTime(ia.created_at)}`),
    h("div", { class: "label" }, "The call the client runs"),
    h("pre", { class: "arguments" }, JSON.stringify(ia.arguments, null, 2)),
    ia.status === "pending" ? null : h("p", { class: "muted client-status" }, `${ia.status}${ia.decision ? `: ${ia.decision}` : ""}`));
}

/** One [kind, line] per argument an edit changes, adds or removes. */
export function argumentChanges(before, after) {
  const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort();
  const changes = [];
  for (const key of keys) {
    const old = JSON.stringify(before[key]);
    const now = JSON.stringify(after[key]);
    if (!(key in after)) changes.push(["removed", `- ${key}: ${old}`]);
    else if (!(key in before)) changes.push(["added", `+ ${key}: ${now}`]);
    else if (old !== now) changes.push(["changed", `~ ${key}: ${old} → ${now}`]);
  }
  return changes;
}

function append(el, ...children) {
  el.append(...children);
}

/** The `interaction_pending` event's data as an `InteractionPublic`-shaped object. */
export function fromEvent(runId, data, createdAt) {
  return {
    id: data.interaction_id,
    run_id: runId,
    kind: data.kind,
    status: data.status,
    tool: data.tool,
    subject: data.subject,
    arguments: typeof data.arguments === "string" ? JSON.parse(data.arguments) : data.arguments,
    payload_hash: data.payload_hash,
    risk: data.risk,
    question: data.question,
    approvers: data.approvers || [],
    created_at: createdAt,
    expires_at: data.expires_at,
  };
}
