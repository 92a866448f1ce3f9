// Sessions: the list, and a chat view of one — send a message (with the busy policy) and
// watch the answer stream in from the new run's events.

import { get, post, query, ApiError } from "./api.js";
import { h, replace, fmtAgo, statusBadge } from "./dom.js";
import { renderMarkdown } from "./markdown.js";
import { navigate, onLeave } from "./nav.js";

export async function sessionsPage(main) {
  const agents = await get("/v1/agents");
  const cursors = [null];
  const body = h("tbody", { id: "sessions-body" });
  const pager = h("div", { class: "pager" });

  let latest = 0;
  async function refresh() {
    const mine = ++latest;
    const page = await get(`/v1/sessions${query({ limit: 50, cursor: cursors[cursors.length - 1] })}`);
    if (mine !== latest) return;
    replace(body, page.sessions.map((s) => h("tr", { dataset: { sessionId: s.id } },
      h("td", {}, h("a", { href: `/console/sessions/${encodeURIComponent(s.id)}` }, s.id)),
      h("td", {}, s.agent), h("td", {}, s.workspace), h("td", {}, s.created_by), h("td", { title: s.created_at }, fmtAgo(s.created_at)))));
    if (!page.sessions.length) body.append(h("tr", {}, h("td", { colspan: 5, class: "muted" }, "No sessions yet.")));
    replace(pager,
      h("button", { disabled: cursors.length === 1, onclick: () => { cursors.pop(); refresh(); } }, "← Newer"),
      h("button", { disabled: !page.next_cursor, onclick: () => { cursors.push(page.next_cursor); refresh(); } }, "Older →"));
  }

  const agent = h("select", { id: "session-agent" }, agents.map((a) => h("option", { value: a.name }, a.name)));
  const workspace = h("input", { id: "session-workspace", placeholder: "workspace directory", value: localStorage.getItem("keel.workspace") || "" });
  const note = h("span", { class: "error" });
  replace(main,
    h("h1", {}, "Sessions"),
    h("form", { class: "card", id: "new-session", onsubmit: async (e) => {
      e.preventDefault();
      try {
        localStorage.setItem("keel.workspace", workspace.value);
        const s = await post("/v1/sessions", { agent: agent.value, workspace: workspace.value });
        navigate(`/console/sessions/${encodeURIComponent(s.id)}`);
      } catch (err) { replace(note, err instanceof ApiError ? err.detail : String(err)); }
    } }, h("strong", {}, "New session "), agent, workspace, h("button", { type: "submit" }, "Create"), note),
    h("table", { class: "list" }, h("thead", {}, h("tr", {}, ["Session", "Agent", "Workspace", "By", "Created"].map((c) => h("th", {}, c)))), body),
    pager);
  await refresh();
}

export async function sessionPage(main, sessionId) {
  const chat = h("div", { id: "chat", class: "chat" });
  const input = h("textarea", { id: "chat-input", rows: 3, placeholder: "Message the agent…" });
  const onBusy = h("select", { id: "chat-on-busy", title: "when a run is still going" },
    ["reject", "enqueue", "interrupt"].map((v) => h("option", { value: v }, `if busy: ${v}`)));
  const note = h("div", { class: "decision-result", id: "chat-result" });
  const streams = [];
  onLeave(() => streams.forEach((s) => s.close()));
  let session = await get(`/v1/sessions/${encodeURIComponent(sessionId)}`);

  function drawHistory() {
    replace(chat, session.messages.map((m) => bubble(m.role, m.content, m.run_id, m.run_status)));
    for (const runId of [session.active_run, ...session.queued_runs].filter(Boolean)) {
      if (!session.messages.some((m) => m.role === "assistant" && m.run_id === runId)) follow(runId);
    }
  }

  function follow(runId) {
    if (chat.querySelector(`[data-streaming="${CSS.escape(runId)}"]`)) return;
    const text = h("div", { class: "bubble-text" });
    const el = h("div", { class: "bubble assistant streaming", dataset: { streaming: runId, runId } },
      h("div", { class: "who" }, "assistant · ", h("a", { href: `/console/runs/${encodeURIComponent(runId)}` }, runId), " · writing…"), text);
    chat.append(el);
    const source = new EventSource(`/v1/runs/${encodeURIComponent(runId)}/events/stream`);
    streams.push(source);
    let attempt = null;
    source.addEventListener("message_delta", (e) => {
      const d = JSON.parse(e.data);
      if (attempt !== `${d.step}/${d.attempt}`) { attempt = `${d.step}/${d.attempt}`; replace(text); }
      text.append(d.delta);
    });
    for (const type of ["done", "error", "cancelled"]) {
      source.addEventListener(type, async (e) => {
        if (!(e instanceof MessageEvent) || !e.data) return;
        source.close();
        session = await get(`/v1/sessions/${encodeURIComponent(sessionId)}`);
        drawHistory();
      });
    }
  }

  replace(main,
    h("h1", {}, "Session ", h("code", {}, session.id)),
    h("p", { class: "muted" }, `${session.agent} · ${session.workspace}${session.model ? ` · ${session.model}` : ""}`),
    chat,
    h("form", { class: "chat-form", id: "chat-form", onsubmit: async (e) => {
      e.preventDefault();
      replace(note);
      if (!input.value.trim()) return;
      try {
        const accepted = await post(`/v1/sessions/${encodeURIComponent(sessionId)}/messages`, { input: input.value, on_busy: onBusy.value });
        chat.append(bubble("user", input.value, accepted.run.id, accepted.run.status));
        input.value = "";
        replace(note, accepted.position ? `Queued: ${accepted.position} ahead of it.` : "Sent.",
          accepted.interrupted ? ` Interrupted ${accepted.interrupted}.` : "");
        follow(accepted.run.id);
      } catch (err) { replace(note, h("span", { class: "error" }, err instanceof ApiError ? `${err.status}: ${err.detail}` : String(err))); }
    } }, input, onBusy, h("button", { type: "submit", id: "chat-send" }, "Send"), note));
  drawHistory();
}

function bubble(role, content, runId, status) {
  return h("div", { class: `bubble ${role}`, dataset: { runId } },
    h("div", { class: "who" }, role, " · ", h("a", { href: `/console/runs/${encodeURIComponent(runId)}` }, runId), " ", statusBadge(status)),
    role === "assistant" ? renderMarkdown(content) : h("div", { class: "bubble-text" }, content));
}
