// One run: its header, running totals, live timeline, final report, stop reason, cancel.

import { get, post, ApiError } from "./api.js";
import { h, replace, fmtTime, fmtCost, statusBadge } from "./dom.js";
import { renderMarkdown } from "./markdown.js";
import { every, onLeave } from "./nav.js";
import { Timeline } from "./timeline.js";

const FINISHED = new Set(["completed", "failed", "cancelled"]);

export async function runPage(main, runId) {
  let run = await get(`/v1/runs/${encodeURIComponent(runId)}`);
  const header = h("div", { id: "run-header" });
  const totals = h("div", { id: "run-totals", class: "totals" });
  const report = h("section", { id: "run-report" });
  const note = h("span", { class: "error", id: "cancel-result" });
  const cancel = h("button", { id: "cancel-run", class: "danger", onclick: async () => {
    cancel.disabled = true;
    try {
      run = await post(`/v1/runs/${encodeURIComponent(runId)}/cancel`);
      drawHeader();
    } catch (err) {
      replace(note, err instanceof ApiError ? err.detail : String(err));
      cancel.disabled = false;
    }
  } }, "Cancel run");

  function drawHeader() {
    replace(header,
      h("h1", {}, "Run ", h("code", { id: "run-id" }, run.id), " ", statusBadge(run.status), coverageBadge(run.coverage)),
      h("dl", { class: "facts" },
        fact("Agent", run.agent), fact("Model", run.model), fact("Trigger", run.trigger),
        run.schedule_id ? fact("Schedule", run.schedule_id) : null,
        run.session_id ? fact("Session", h("a", { href: `/console/sessions/${encodeURIComponent(run.session_id)}` }, run.session_id)) : null,
        run.forked_from ? fact("Forked from", [h("a", { id: "forked-from", href: `/console/runs/${encodeURIComponent(run.forked_from)}` }, run.forked_from), ` at step ${run.forked_at_step}`]) : null,
        run.parent_run_id ? fact("Parent", h("a", { href: `/console/runs/${encodeURIComponent(run.parent_run_id)}` }, run.parent_run_id)) : null,
        fact("Requester", run.requester), fact("Workspace", run.workspace),
        fact("Created", fmtTime(run.created_at)), run.finished_at ? fact("Finished", fmtTime(run.finished_at)) : null,
        run.stop_reason ? fact("Stop reason", h("code", { id: "run-stop-reason" }, run.stop_reason)) : null),
      FINISHED.has(run.status) ? null : h("div", {}, cancel, note));
    drawTotals();
    if (run.report) replace(report, h("h2", {}, "Report"), h("div", { id: "report-body" }, renderMarkdown(run.report)));
    if (run.error) report.append(h("p", { class: "error", id: "run-error" }, run.error));
  }

  let live = { prompt: 0, completion: 0, calls: 0, tools: 0 };
  // What the run costs is its tree's: its own calls (live, from its events) plus its
  // sub-agent runs' (from `total_usage`, the sum of the tree's recorded calls).
  function drawTotals() {
    const own = run.usage;
    const tree = run.total_usage ?? own;
    const subs = (tree.runs ?? 1) - 1;
    const ownPrompt = Math.max(live.prompt, own.prompt_tokens);
    const ownCompletion = Math.max(live.completion, own.completion_tokens);
    const prompt = ownPrompt + Math.max(0, tree.prompt_tokens - own.prompt_tokens);
    const completion = ownCompletion + Math.max(0, tree.completion_tokens - own.completion_tokens);
    const withSubs = subs > 0 ? " (with sub-agents)" : "";
    replace(totals,
      total(`Tokens in${withSubs}`, prompt, "tokens-in"), total(`Tokens out${withSubs}`, completion, "tokens-out"),
      total(`Cost${withSubs}`, fmtCost(tree.cost_usd), "cost"),
      subs > 0 ? total(`This run's own (${subs} sub-agent run${subs > 1 ? "s" : ""} below)`,
        `${ownPrompt} in · ${ownCompletion} out · ${fmtCost(own.cost_usd)}`, "own") : null,
      total("Steps", Math.max(run.steps, live.calls), "steps"),
      total("Tool calls", Math.max(run.tool_calls, live.tools), "tool-calls"));
  }

  let refreshing = null;
  const refresh = () => {
    refreshing ??= get(`/v1/runs/${encodeURIComponent(runId)}`).then((r) => { run = r; drawHeader(); }).finally(() => { refreshing = null; });
    return refreshing;
  };
  const timeline = new Timeline(runId, {
    onUsage: (t) => { live = t; drawTotals(); refresh(); },
    onTerminal: async () => {
      // The terminal event is durable before the workflow closes: read until the run says so.
      for (let i = 0; i < 40 && !FINISHED.has(run.status); i++) {
        await refreshing;
        await refresh();
        if (!FINISHED.has(run.status)) await new Promise((r) => setTimeout(r, 250));
      }
    },
  });
  drawHeader();
  replace(main, header, totals, h("h2", {}, "Timeline"), timeline.el, report);
  timeline.start();
  // Sub-agents spend while the run itself is quiet: read the tree's figures now and then.
  every(2000, () => (FINISHED.has(run.status) ? null : refresh()));
  onLeave(() => timeline.stop());
}

function fact(label, value) {
  return [h("dt", {}, label), h("dd", {}, value)];
}

function total(label, value, id) {
  return h("div", { class: "total" }, h("div", { class: "muted small" }, label), h("div", { class: "value", id: `total-${id}` }, String(value)));
}

// What Keel's records show a review read: a partial one never shows as just "completed".
function coverageBadge(coverage) {
  if (!coverage) return null;
  const text = `${coverage.status} · ${coverage.files_covered} of ${coverage.files_total} files`;
  return h("span", { id: "run-coverage", class: `badge coverage-${coverage.status}`, "data-coverage": coverage.status }, text);
}
