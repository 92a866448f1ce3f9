// Evals: what `keel eval` recorded, newest first; one eval's scenarios, attempts and runs.

import { get } from "./api.js";
import { h, replace, fmtTime, fmtCost } from "./dom.js";

const pct = (x) => `${Math.round(x * 100)}%`;
const mean = (xs) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);

function verdict(ok) {
  return h("span", { class: `badge status-${ok ? "completed" : "failed"}`, "data-verdict": ok ? "pass" : "fail" }, ok ? "pass" : "fail");
}

export async function evalsPage(main) {
  const rows = await get("/v1/evals?limit=100");
  replace(main,
    h("h1", {}, "Evals"),
    rows.length ? null : h("p", { class: "muted" }, "No eval results yet: `keel eval` records each call's results here."),
    h("table", { class: "list", id: "evals-table" },
      h("thead", {}, h("tr", {}, ["Eval", "When", "By", "Scenarios passed", "Runs each", "Result"].map((c) => h("th", {}, c)))),
      h("tbody", {}, rows.map((r) => h("tr", { dataset: { eval: r.id } },
        h("td", {}, h("a", { href: `/console/evals/${encodeURIComponent(r.id)}` }, r.id)),
        h("td", {}, fmtTime(r.recorded_at)),
        h("td", {}, r.requester),
        h("td", {}, `${r.passed}/${r.scenarios}`),
        h("td", {}, String(r.repeat)),
        h("td", {}, verdict(r.passed === r.scenarios)))))));
}

export async function evalPage(main, id) {
  const result = await get(`/v1/evals/${encodeURIComponent(id)}`);
  const report = result.report;
  const needed = report.min_pass_rate;
  replace(main,
    h("h1", {}, `Eval ${result.id}`),
    h("p", { class: "muted" }, `${result.passed} of ${result.scenarios} scenarios passed · ${report.repeat} run(s) each · pass rate needed ${pct(needed)} · ${fmtTime(report.started_at)}`),
    h("table", { class: "list", id: "eval-scenarios" },
      h("thead", {}, h("tr", {}, ["Scenario", "Agent", "Result", "Passed", "Tokens", "Cost", "Failed expectations", "Runs"].map((c) => h("th", {}, c)))),
      h("tbody", {}, report.scenarios.map((s) => {
        const passes = s.attempts.filter((a) => a.passed).length;
        const rate = s.attempts.length ? passes / s.attempts.length : 0;
        const failures = [...new Set(s.attempts.flatMap((a) => a.failures))];
        return h("tr", { dataset: { scenario: s.name } },
          h("td", {}, s.name),
          h("td", {}, s.agent),
          h("td", {}, verdict(rate >= needed)),
          h("td", {}, `${passes}/${s.attempts.length} (${pct(rate)})`),
          h("td", {}, String(Math.round(mean(s.attempts.map((a) => a.tokens))))),
          h("td", {}, fmtCost(mean(s.attempts.map((a) => a.cost_usd)))),
          h("td", { class: "failures" }, failures.length ? h("ul", {}, failures.map((f) => h("li", {}, f))) : "-"),
          h("td", {}, s.attempts.map((a) => a.run_id
            ? h("a", { href: `/console/runs/${encodeURIComponent(a.run_id)}`, class: a.passed ? "ok" : "error", title: a.failures.join("\n") }, `#${a.attempt} `)
            : h("span", { class: "error", title: a.failures.join("\n") }, `#${a.attempt} `))));
      }))));
}
