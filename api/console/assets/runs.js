// Runs: newest first, filtered by status, agent, trigger and schedule, paged by cursor,
// refreshed every two seconds so status changes show without a reload. Top-level runs
// only, each with its number of sub-agent runs, unless "with sub-agent runs" is ticked
// or the page lists one run's children (`?parent=RUN_ID`).

import { get, post, query, ApiError } from "./api.js";
import { h, replace, fmtAgo, fmtCost, statusBadge } from "./dom.js";
import { every, navigate } from "./nav.js";
import { defaultAgent } from "./agents.js";

const STATUSES = ["", "queued", "running", "waiting", "completed", "failed", "cancelled"];
const TRIGGERS = ["", "api", "cli", "a2a", "schedule", "parent"];
const PAGE = 50;

export async function runsPage(main) {
  const params = new URLSearchParams(location.search);
  const filters = {
    status: params.get("status") || "",
    agent: params.get("agent") || "",
    trigger: params.get("trigger") || "",
    schedule: params.get("schedule") || "",
    children: params.get("children") === "include" ? "include" : "",
    parent: params.get("parent") || "",
  };
  const cursors = [null]; // the cursor of each page seen, for going back
  const agents = await get("/v1/agents");

  const select = (name, options) => h("select", { name, id: `filter-${name}`, onchange: (e) => setFilter(name, e.target.value) },
    options.map((o) => h("option", { value: o, selected: filters[name] === o }, o || `any ${name}`)));
  const scheduleInput = h("input", { id: "filter-schedule", placeholder: "schedule id", value: filters.schedule,
    onchange: (e) => setFilter("schedule", e.target.value.trim()) });
  const childrenBox = h("label", {}, h("input", { type: "checkbox", id: "filter-children", checked: filters.children === "include",
    onchange: (e) => setFilter("children", e.target.checked ? "include" : "") }), " with sub-agent runs");
  const parentNote = filters.parent
    ? h("p", { id: "runs-parent" }, "Sub-agent runs of ", h("a", { href: `/console/runs/${encodeURIComponent(filters.parent)}` }, filters.parent),
      " · ", h("a", { href: "/console/runs" }, "all runs"))
    : h("p", { id: "runs-parent" });
  const body = h("tbody", { id: "runs-body" });
  const pager = h("div", { class: "pager" });
  const info = h("p", { class: "muted", id: "runs-info" });

  function setFilter(name, value) {
    filters[name] = value;
    const q = query(filters);
    history.replaceState({}, "", `/console/runs${q}`);
    cursors.splice(0, cursors.length, null);
    refresh();
  }

  let latest = 0;
  async function refresh() {
    // A poll and a click may overlap: only the newest request may draw.
    const mine = ++latest;
    const cursor = cursors[cursors.length - 1];
    const page = await get(`/v1/runs${query({ ...filters, limit: PAGE, cursor })}`);
    if (mine !== latest) return;
    replace(body, page.runs.map(row));
    if (!page.runs.length) body.append(h("tr", {}, h("td", { colspan: 9, class: "muted" }, "No runs match.")));
    replace(info, `Page ${cursors.length} · ${page.runs.length} runs · live`);
    replace(pager,
      h("button", { id: "page-prev", disabled: cursors.length === 1, onclick: () => turn(() => cursors.pop()) }, "← Newer"),
      h("button", { id: "page-next", disabled: !page.next_cursor, onclick: () => turn(() => cursors.push(page.next_cursor)) }, "Older →"));
  }

  // A second click before the page it asked for is drawn would turn from the old page
  // again (skipping or repeating one): the buttons wait for the redraw.
  function turn(move) {
    pager.querySelectorAll("button").forEach((b) => { b.disabled = true; });
    move();
    refresh();
  }

  replace(main,
    h("h1", {}, "Runs"),
    startForm(agents),
    h("div", { class: "filters" },
      select("status", STATUSES),
      select("agent", ["", ...agents.map((a) => a.name)]),
      select("trigger", TRIGGERS),
      scheduleInput,
      childrenBox),
    parentNote,
    info,
    h("table", { class: "list", id: "runs-table" },
      h("thead", {}, h("tr", {}, ["Run", "Agent", "Status", "Trigger", "Created", "Steps", "Sub-agents", "Tokens (with sub-agents)", "Cost (with sub-agents)"].map((c) => h("th", {}, c)))),
      body),
    pager);
  every(2000, refresh);
}

function row(run) {
  return h("tr", { dataset: { runId: run.id }, class: "run-row" },
    h("td", {}, h("a", { href: `/console/runs/${encodeURIComponent(run.id)}` }, run.id),
      run.parent_run_id ? h("div", { class: "muted small" }, `child of ${run.parent_run_id}`) : null),
    h("td", {}, run.agent),
    h("td", {}, statusBadge(run.status), coverageBadge(run)),
    h("td", {}, run.trigger, run.schedule_id ? h("div", { class: "muted small" }, run.schedule_id) : null),
    h("td", { title: run.created_at }, fmtAgo(run.created_at)),
    h("td", {}, String(run.steps)),
    h("td", { class: "children" }, run.child_count
      ? h("a", { href: `/console/runs?parent=${encodeURIComponent(run.id)}` }, String(run.child_count))
      : "0"),
    h("td", { class: "tokens" }, String((run.total_usage ?? run.usage).total_tokens)),
    h("td", { class: "cost" }, fmtCost((run.total_usage ?? run.usage).cost_usd)));
}

// What Keel's records show a review read: a partial one never lists as just "completed".
function coverageBadge(run) {
  const coverage = run.coverage;
  if (!coverage) return null;
  const text = `${coverage.status} · ${coverage.files_covered} of ${coverage.files_total} files`;
  const why = run.stop_reason && run.stop_reason !== "final_answer" ? ` (stop reason ${run.stop_reason})` : "";
  return h("span", { class: `badge run-coverage coverage-${coverage.status}`, "data-coverage": coverage.status, title: text + why }, text);
}

function startForm(agents) {
  const agent = h("select", { id: "start-agent" }, agents.map((a) => h("option", { value: a.name, selected: a.name === defaultAgent(agents) }, a.name)));
  const input = h("textarea", { id: "start-input", rows: 2, placeholder: "What should the agent do?" });
  const workspace = h("input", { id: "start-workspace", placeholder: "workspace directory (inside the server's root)", value: localStorage.getItem("keel.workspace") || "" });
  const note = h("span", { class: "error", id: "start-error" });
  return h("details", { class: "card", id: "start-run" },
    h("summary", {}, "Start a run"),
    h("form", { onsubmit: async (e) => {
      e.preventDefault();
      replace(note);
      try {
        localStorage.setItem("keel.workspace", workspace.value);
        const run = await post("/v1/runs", { agent: agent.value, input: input.value, workspace: workspace.value });
        navigate(`/console/runs/${encodeURIComponent(run.id)}`);
      } catch (err) {
        replace(note, err instanceof ApiError ? err.detail : String(err));
      }
    } }, agent, input, workspace, h("button", { type: "submit", id: "start-submit" }, "Start"), note));
}
