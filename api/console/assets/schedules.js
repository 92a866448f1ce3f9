// Schedules: the list with next fire times; create (cron or interval) with a preview of the
// next fires; pause, resume, trigger now, backfill, delete. Every time a schedule shows is
// in its own time zone, named with its offset, as the CLI prints it (fmtZoned).

import { api, get, post, ApiError } from "./api.js";
import { h, replace, fmtZoned } from "./dom.js";
import { defaultAgent } from "./agents.js";

export async function schedulesPage(main) {
  const agents = await get("/v1/agents");
  const list = h("div", { id: "schedules" });
  const info = h("p", { class: "muted" });

  const notes = new Map(); // the last action's answer per schedule, kept across redraws
  const fresh = new Map(); // created here: Temporal's list may not show them for a moment
  async function refresh() {
    const page = await get("/v1/schedules?limit=200");
    const ids = new Set(page.schedules.map((s) => s.id));
    for (const id of [...fresh.keys()]) if (ids.has(id)) fresh.delete(id);
    const known = await Promise.all([...fresh.keys()].map((id) => get(`/v1/schedules/${encodeURIComponent(id)}`).catch(() => null)));
    page.schedules.push(...known.filter(Boolean));
    replace(list, page.schedules.map((s) => card(s, refresh, notes)));
    replace(info, page.schedules.length ? `${page.schedules.length} schedules` : "No schedules yet.");
  }

  const f = {
    id: h("input", { id: "sched-id", placeholder: "id (optional)" }),
    agent: h("select", { id: "sched-agent" }, agents.map((a) => h("option", { value: a.name, selected: a.name === defaultAgent(agents) }, a.name))),
    input: h("textarea", { id: "sched-input", rows: 2, placeholder: "The task each run gets" }),
    workspace: h("input", { id: "sched-workspace", placeholder: "workspace directory", value: localStorage.getItem("keel.workspace") || "" }),
    kind: h("select", { id: "sched-kind" }, h("option", { value: "cron" }, "cron"), h("option", { value: "interval" }, "every N seconds")),
    when: h("input", { id: "sched-when", placeholder: "0 2 * * *  or  3600" }),
    zone: h("input", { id: "sched-zone", value: "UTC", placeholder: "time zone" }),
  };
  const preview = h("ul", { id: "sched-preview", class: "muted" });
  const note = h("div", { id: "sched-result" });
  const spec = () => {
    const body = { agent: f.agent.value, input: f.input.value || "(preview)", workspace: f.workspace.value || ".", time_zone: f.zone.value || "UTC" };
    if (f.id.value.trim()) body.schedule_id = f.id.value.trim();
    if (f.kind.value === "cron") body.cron_expressions = [f.when.value.trim()];
    else body.interval_s = Number(f.when.value.trim());
    return body;
  };
  let timer = null;
  const showPreview = () => {
    clearTimeout(timer);
    timer = setTimeout(async () => {
      if (!f.when.value.trim()) { replace(preview); return; }
      try {
        const p = await post("/v1/schedule-preview?count=5", spec());
        replace(preview, h("li", {}, "Next fires:"), p.next_fire_times.map((t) => h("li", { class: "fire-time" }, fmtZoned(t, p.time_zone || f.zone.value || "UTC"))));
      } catch (err) { replace(preview, h("li", { class: "error" }, err.detail || String(err))); }
    }, 250);
  };
  for (const el of [f.when, f.kind, f.zone]) el.addEventListener("input", showPreview);

  replace(main,
    h("h1", {}, "Schedules"),
    h("form", { class: "card", id: "new-schedule", onsubmit: async (e) => {
      e.preventDefault();
      replace(note);
      try {
        localStorage.setItem("keel.workspace", f.workspace.value);
        const s = await post("/v1/schedules", spec());
        fresh.set(s.id, true);
        replace(note, h("span", { class: "ok" }, `Created ${s.id}.`));
        await refresh();
      } catch (err) { replace(note, h("span", { class: "error" }, err instanceof ApiError ? err.detail : String(err))); }
    } },
    h("strong", {}, "New schedule"), f.id, f.agent, f.input, f.workspace, f.kind, f.when, f.zone, preview,
    h("button", { type: "submit", id: "sched-create" }, "Create"), note),
    info, list);
  await refresh();
}

function card(s, refresh, notes) {
  const result = h("div", { class: "decision-result" }, notes.get(s.id) ?? "");
  const act = (label, cls, fn) => h("button", { class: cls, onclick: async () => {
    try { notes.set(s.id, await fn()); } catch (err) { notes.set(s.id, h("span", { class: "error" }, err.detail || String(err))); }
    replace(result, notes.get(s.id));
    await refresh();
  } }, label);
  const id = encodeURIComponent(s.id);
  const start = h("input", { type: "datetime-local", class: "bf-start" });
  const end = h("input", { type: "datetime-local", class: "bf-end" });
  return h("article", { class: "card schedule", dataset: { scheduleId: s.id, paused: String(s.paused) } },
    h("header", {}, h("strong", {}, s.id), " ", h("span", { class: `badge ${s.paused ? "status-cancelled" : "status-running"}` }, s.paused ? "paused" : "active"),
      ` ${s.agent} · ${s.cron_expressions.length ? s.cron_expressions.join(", ") + ` (${s.time_zone})` : `every ${s.interval_s}s`}`),
    h("p", {}, s.input),
    h("div", { class: "muted small" }, `next: ${s.next_fire_times.slice(0, 3).map((t) => fmtZoned(t, s.time_zone)).join(", ") || "—"} · started ${s.runs_started} runs`,
      s.running_runs.length ? ` · running: ${s.running_runs.join(", ")}` : ""),
    s.recent_runs.length ? h("div", { class: "small" }, "recent: ", s.recent_runs.slice(-5).map((r) => [h("a", { href: `/console/runs/${encodeURIComponent(r.run_id)}` }, r.run_id), " "])) : null,
    h("div", { class: "buttons" },
      s.paused
        ? act("Resume", "resume", async () => { await post(`/v1/schedules/${id}/unpause`); return "Resumed."; })
        : act("Pause", "pause", async () => { await post(`/v1/schedules/${id}/pause`); return "Paused."; }),
      act("Trigger now", "trigger", async () => { const t = await post(`/v1/schedules/${id}/trigger`); return t.skipped ? "Skipped by the overlap policy." : `Started ${t.run_id || "a run"}.`; }),
      h("span", { class: "small" }, " backfill ", start, " to ", end),
      act("Backfill", "backfill", async () => {
        const b = await post(`/v1/schedules/${id}/backfill`, { start: new Date(start.value).toISOString(), end: new Date(end.value).toISOString() });
        return `Backfilling ${b.fire_times} runs.`;
      }),
      act("Delete", "delete danger", async () => {
        if (!confirm(`Delete schedule ${s.id}? Its runs stay.`)) return "Kept.";
        await api("DELETE", `/v1/schedules/${id}`);
        return "Deleted.";
      })),
    result);
}
