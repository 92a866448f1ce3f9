// A run's live timeline from its SSE stream.
//
// Durable events carry `id: <seq>`; the browser's EventSource sends the last one back as
// `Last-Event-ID` when it reconnects, and the server resumes after it. Events are also
// de-duplicated here by `seq`, so a resumed stream never shows one twice. `message_delta`
// events (no id, never stored) stream the answer being written into a live box that the
// durable `message` replaces. Rendering is batched per animation frame so a run with
// thousands of events stays responsive.

import { get } from "./api.js";
import { h, replace, append, json, fmtTime } from "./dom.js";
import { decisionCard, fromEvent } from "./decisions.js";
import { forkControl } from "./fork.js";
import { renderMarkdown } from "./markdown.js";

const TYPES = [
  "run_started", "message", "usage", "tool_call", "tool_result", "interaction_pending",
  "interaction_resolved", "child_run", "compaction", "route_decision", "memory", "done", "error",
  "cancelled", "message_delta",
];
const TERMINAL = new Set(["done", "error", "cancelled"]);
const FRAME_BUDGET_MS = 10;

export class Timeline {
  constructor(runId, { onTerminal, onUsage, depth = 0 } = {}) {
    this.runId = runId;
    this.depth = depth;
    this.onTerminal = onTerminal;
    this.onUsage = onUsage;
    this.lastSeq = 0;
    this.count = 0;
    this.reconnects = 0;
    this.totals = { prompt: 0, completion: 0, calls: 0, tools: 0 };
    this.steps = new Map();
    this.tools = new Map();
    this.cards = new Map();
    this.live = new Map();
    this.queue = [];
    this.scheduled = false;
    this.ended = false;
    this.status = h("span", { class: "stream-state", "data-state": "connecting" }, "connecting…");
    this.list = h("ol", { class: "timeline", dataset: { runId } });
    this.el = h("section", { class: "timeline-wrap" }, h("div", { class: "muted small" }, "Stream: ", this.status), this.list);
  }

  start() {
    this.open();
    return this;
  }

  open() {
    const url = `/v1/runs/${encodeURIComponent(this.runId)}/events/stream${this.lastSeq ? `?after=${this.lastSeq}` : ""}`;
    const source = new EventSource(url);
    this.source = source;
    source.addEventListener("open", () => this.setState("live"));
    for (const type of TYPES) source.addEventListener(type, (e) => this.receive(type, e));
    source.addEventListener("error", (e) => {
      if (e instanceof MessageEvent && e.data) return; // the run's own `error` event, handled above
      if (this.ended) return;
      this.reconnects++;
      this.list.dataset.reconnects = String(this.reconnects);
      if (source.readyState === EventSource.CLOSED) {
        // The browser gave up (e.g. a 5xx while the API restarted): reopen after the last seq.
        this.setState("reconnecting");
        setTimeout(() => { if (!this.ended && this.source === source) this.open(); }, 1000);
      } else {
        this.setState("reconnecting"); // EventSource retries itself, sending Last-Event-ID
      }
    });
  }

  stop() {
    this.ended = true;
    this.source?.close();
  }

  setState(state) {
    this.status.dataset.state = state;
    replace(this.status, state);
  }

  receive(type, e) {
    if (!e.data) return;
    let event;
    try { event = JSON.parse(e.data); } catch { return; }
    if (type === "message_delta") { this.delta(event); return; }
    if (typeof event.seq !== "number" || event.seq <= this.lastSeq) return; // already shown
    this.lastSeq = event.seq;
    this.queue.push(event);
    if (!this.scheduled) {
      this.scheduled = true;
      requestAnimationFrame(() => this.flush());
    }
    if (TERMINAL.has(event.type)) {
      this.ended = true;
      this.source.close();
      this.setState("ended");
    }
  }

  flush() {
    // At most ~10 ms of rendering a frame, so a long run fills in without freezing the page.
    const started = performance.now();
    const done = [];
    while (this.queue.length && performance.now() - started < FRAME_BUDGET_MS) {
      const event = this.queue.shift();
      this.render(event);
      done.push(event);
    }
    this.list.dataset.count = String(this.count);
    this.list.dataset.lastSeq = String(done.length ? done[done.length - 1].seq : this.lastSeq);
    if (this.queue.length) {
      requestAnimationFrame(() => this.flush());
    } else {
      this.scheduled = false;
      this.list.dataset.lastSeq = String(this.lastSeq);
    }
    for (const event of done) if (TERMINAL.has(event.type)) this.onTerminal?.(event);
  }

  step(n) {
    let section = this.steps.get(n);
    if (!section) {
      const body = h("ol", { class: "step-events" });
      section = h("li", { class: "step", dataset: { step: String(n) } }, h("div", { class: "step-title" }, `Step ${n} `, forkControl(this.runId, n)), body);
      section.body = body;
      this.steps.set(n, section);
      this.list.append(section);
    }
    return section.body;
  }

  item(event, ...children) {
    this.count++;
    const li = h("li", { class: `event ev-${event.type}`, dataset: { seq: String(event.seq), type: event.type }, title: fmtTime(event.created_at) }, ...children);
    const d = event.data || {};
    (typeof d.step === "number" ? this.step(d.step) : this.list).append(li);
    return li;
  }

  delta(d) {
    const key = d.step;
    let box = this.live.get(key);
    if (!box || box.attempt !== d.attempt) {
      box?.el.remove();
      const text = h("div", { class: "live-text" });
      box = { attempt: d.attempt, index: -1, text, el: h("li", { class: "event live-answer", dataset: { step: String(d.step) } }, h("div", { class: "label" }, "Writing…"), text) };
      this.live.set(key, box);
      this.step(d.step).append(box.el);
    }
    if (d.delta_index <= box.index) return;
    box.index = d.delta_index;
    box.text.append(d.delta);
  }

  render(event) {
    const d = event.data || {};
    switch (event.type) {
      case "run_started":
        this.item(event, h("strong", {}, "Started"), ` ${d.agent} · ${d.model} · trigger ${d.trigger}`,
          d.schedule_id ? ` · schedule ${d.schedule_id}` : "",
          h("pre", { class: "input" }, d.input ?? ""));
        break;
      case "message": {
        this.live.get(d.step)?.el.remove();
        this.live.delete(d.step);
        const calls = d.tool_calls || [];
        const usage = h("span", { class: "usage muted" });
        this.cards.set(`usage:${d.step}`, usage);
        this.item(event, h("strong", {}, "Model"), " ", usage,
          d.content ? h("div", { class: "model-text" }, d.content) : null,
          calls.length ? h("div", { class: "muted small" }, `asked for ${calls.map((c) => c.name).join(", ")}`) : null);
        break;
      }
      case "usage": {
        this.totals.prompt += d.prompt_tokens || 0;
        this.totals.completion += d.completion_tokens || 0;
        this.totals.calls++;
        const text = `${d.prompt_tokens} in · ${d.completion_tokens} out · ${d.latency_ms} ms`;
        const slot = this.cards.get(`usage:${d.step}`);
        if (slot) replace(slot, text);
        else this.item(event, "Usage ", text);
        this.count += slot ? 1 : 0;
        this.onUsage?.(this.totals);
        break;
      }
      case "tool_call": {
        this.totals.tools++;
        const result = h("div", { class: "tool-result muted" }, "running…");
        const li = this.item(event, h("strong", { class: "tool-name" }, d.name), " ", toolArguments(d.name, d.arguments), result);
        li.dataset.callId = d.call_id;
        this.tools.set(`${d.step}:${d.call_id}`, result);
        break;
      }
      case "tool_result": {
        const slot = this.tools.get(`${d.step}:${d.call_id}`);
        const body = this.toolResult(d);
        if (slot) { replace(slot, body); slot.className = `tool-result${d.is_error ? " is-error" : ""}`; this.count++; }
        else this.item(event, body);
        break;
      }
      case "interaction_pending": {
        const card = decisionCard(fromEvent(this.runId, d, event.created_at), { showRun: false });
        this.cards.set(`ia:${d.interaction_id}`, card);
        const waiting = { ask_user: "Waiting for an answer", local_tool_result: "Waiting for the client that started the run", secret_ref: "Waiting for a secret" };
        this.item(event, h("strong", {}, waiting[d.kind] || "Waiting for approval"), card);
        break;
      }
      case "interaction_resolved": {
        const card = this.cards.get(`ia:${d.interaction_id}`);
        if (card) {
          card.dataset.status = d.status;
          for (const el of card.querySelectorAll("button, textarea, input")) el.remove();
        }
        if (d.kind === "local_tool_result") {
          card?.querySelector(".time-left")?.remove();
          const how = d.status === "answered" ? "Answered by the client that started the run" : `Client call ${d.status}`;
          this.item(event, h("strong", {}, how), d.decided_by ? ` (${d.decided_by})` : "");
          break;
        }
        if (d.status === "cancelled" && !d.decision) {
          this.item(event, h("strong", {}, "Closed"), " the run ended before anyone decided it");
          break;
        }
        this.item(event, h("strong", {}, "Decided"), ` ${d.decision || d.status}${d.decided_by ? ` by ${d.decided_by}` : ""}`);
        break;
      }
      case "child_run": {
        // A child reports more than once (started, waiting, finished): one node, kept current.
        const id = d.child_run_id || d.run_id || d.child_id;
        const known = this.cards.get(`child:${id}`);
        if (known) { known.update(d); this.count++; }
        else this.item(event, this.child(d, id));
        break;
      }
      case "compaction":
        this.item(event, h("strong", {}, "Context compacted"), " ",
          h("span", { class: "muted" }, Object.entries(d).filter(([k, v]) => k !== "step" && typeof v !== "object").map(([k, v]) => `${k}: ${v}`).join(" · ")),
          d.summary ? h("details", {}, h("summary", {}, "summary"), h("pre", {}, typeof d.summary === "string" ? d.summary : json(d.summary))) : null);
        break;
      case "route_decision": {
        const title = { routed: `Routed to ${d.agent}`, route_only: `Route: ${d.agent}`,
          clarifying: "Asking which agent", refused: "Refused" }[d.outcome] || d.outcome;
        this.item(event, h("strong", {}, title), " ", h("span", { class: "muted" }, d.reason ?? ""),
          h("details", {}, h("summary", {}, "candidates"), h("pre", {}, json({ candidates: d.candidates, excluded: d.excluded, classification: d.classification }))));
        break;
      }
      case "memory":
        this.item(event, ...memoryEvent(d));
        break;
      case "done":
      case "error":
      case "cancelled":
        this.item(event, h("strong", {}, event.type === "done" ? "Finished" : event.type === "error" ? "Failed" : "Cancelled"),
          ` · ${d.status} · stop reason: `, h("code", { class: "stop-reason" }, d.stop_reason ?? ""),
          d.error ? h("div", { class: "error" }, d.error) : null);
        break;
      default:
        this.item(event, h("strong", {}, event.type), h("pre", {}, json(d)));
    }
  }

  toolResult(d) {
    const out = h("div", {});
    const full = h("pre", { class: "output full", hidden: true });
    const button = h("button", { class: "link expand", onclick: async () => {
      if (!full.hidden) { full.hidden = true; replace(button, "show full output"); return; }
      try {
        const stored = await get(`/v1/runs/${encodeURIComponent(this.runId)}/tool-outputs/${d.step}/${encodeURIComponent(d.call_id)}`);
        replace(full, stored.content);
      } catch (err) {
        replace(full, `Could not load the stored output: ${err.detail || err}`);
      }
      full.hidden = false;
      replace(button, "hide full output");
    } }, "show full output");
    append(out, [
      h("span", { class: "muted small" }, d.is_error ? "error" : "ok", d.cached ? " · cached" : "", d.size !== undefined ? ` · ${d.size} bytes` : ""),
      h("pre", { class: "output preview" }, d.preview ?? ""),
      button, full,
    ]);
    return out;
  }

  child(d, childId) {
    const nested = h("div", { class: "child-timeline" });
    const state = h("span", { class: "child-status" });
    let timeline = null;
    const toggle = h("button", { class: "link", onclick: () => {
      if (timeline) { timeline.stop(); timeline = null; replace(nested); replace(toggle, "show its timeline"); return; }
      timeline = new Timeline(childId, { depth: this.depth + 1 }).start();
      replace(nested, timeline.el);
      replace(toggle, "hide its timeline");
    } }, "show its timeline");
    const node = h("div", { class: "child-run", dataset: { childRunId: childId || "" } },
      h("strong", {}, "Sub-agent "), d.agent ? `${d.agent} ` : "",
      childId ? h("a", { href: `/console/runs/${encodeURIComponent(childId)}` }, childId) : "",
      " · ", state, d.task || d.prompt ? h("div", { class: "muted child-task" }, d.task || d.prompt) : null,
      childId && this.depth < 4 ? toggle : null, nested);
    node.update = (data) => {
      node.dataset.status = data.status || "";
      const waiting = data.pending_interactions?.length;
      replace(state, data.status || "", waiting ? h("span", { class: "badge waiting" }, `waiting on ${waiting}`) : null);
    };
    node.update(d);
    this.cards.set(`child:${childId}`, node);
    return node;
  }
}

/** A `memory` event (docs/memory.md): what was recalled, by id and source, never fact text. */
function memoryEvent(d) {
  const count = typeof d.count === "number" ? d.count : (d.memories || []).length;
  const plural = (n) => `${n} ${n === 1 ? "memory" : "memories"}`;
  const title = d.action === "recalled"
    ? (count ? `Recalled ${plural(count)}` : "No memories recalled")
    : `Memory ${d.action ?? "event"}`;
  const facts = Object.entries(d).filter(([k, v]) => !["action", "count", "step"].includes(k) && v !== null && typeof v !== "object");
  const items = (d.memories || []).map((m) => h("li", { class: "memory-ref", dataset: { memoryId: String(m.id ?? "") } },
    h("code", {}, String(m.id ?? "")),
    m.source_run_id ? [" · from run ", h("a", { href: `/console/runs/${encodeURIComponent(m.source_run_id)}` }, String(m.source_run_id))] : "",
    m.source_session_id ? ` · session ${m.source_session_id}` : "",
    m.updated_at ? ` · ${fmtTime(m.updated_at)}` : ""));
  return [h("strong", {}, title),
    facts.length ? [" ", h("span", { class: "muted" }, facts.map(([k, v]) => `${k}: ${v}`).join(" · "))] : "",
    items.length ? h("ul", { class: "memory-list small" }, items) : null];
}

/** A tool call's arguments: JSON, except a sub-agent's task, which reads as the agent it
 * goes to and the prompt it is given (its line breaks kept, not `\n`). */
function toolArguments(name, value) {
  const args = parsed(value);
  if (name === "task" && args && typeof args.prompt === "string") {
    return h("div", { class: "arguments task-arguments" },
      h("div", {}, "to ", h("strong", { class: "task-agent" }, String(args.agent ?? "")),
        ...Object.entries(args).filter(([k]) => k !== "agent" && k !== "prompt").map(([k, v]) => ` · ${k}: ${typeof v === "string" ? v : JSON.stringify(v)}`)),
      h("pre", { class: "task-prompt" }, args.prompt));
  }
  return h("pre", { class: "arguments" }, json(args));
}

/** Tool arguments arrive as canonical JSON text or as an object; show them pretty. */
function parsed(value) {
  if (typeof value !== "string") return value;
  try { return JSON.parse(value); } catch { return value; }
}

export function renderReport(markdown) {
  return renderMarkdown(markdown);
}
