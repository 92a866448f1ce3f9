// Usage: the tenant's tokens and cost per day and per agent, as bar charts and a table.
// The charts are Chart.js (chart.umd.min.js, MIT, served from these assets like the rest
// of the console): it lays out the axes, skips day labels that would collide, and the
// tick callbacks below put thousands separators on every number.

import { get } from "./api.js";
import { h, replace, fmtCost, fmtCount } from "./dom.js";
import { quotaCard } from "./quota.js";

const DAY_MS = 86_400_000;
const COST = new Intl.NumberFormat(undefined, { style: "currency", currency: "USD", maximumSignificantDigits: 4 });

/** Every UTC day of the period, oldest first ("2026-12-02"), so a day without calls is a
 * zero rather than a gap that lets one busy day fill the whole chart. */
export function periodDays(days, now = Date.now()) {
  const today = Math.floor(now / DAY_MS) * DAY_MS;
  return Array.from({ length: days }, (_, i) => new Date(today - (days - 1 - i) * DAY_MS).toISOString().slice(0, 10));
}

function dayLabel(day) {
  return new Date(`${day}T00:00:00Z`).toLocaleDateString(undefined, { month: "short", day: "numeric", timeZone: "UTC" });
}

function chart(Chart, id, title, labels, values, format, horizontal = false) {
  const canvas = h("canvas", { id, role: "img", "aria-label": title });
  const box = h("div", { class: "chart-box" }, canvas);
  // One bar per agent, each tall enough for its name (set through the CSSOM, which the
  // console's style policy allows).
  if (horizontal) box.style.height = `${Math.max(160, labels.length * 28 + 40)}px`;
  const figure = h("figure", { class: "card chart-card" }, h("figcaption", {}, title), box);
  const valueAxis = { beginAtZero: true, ticks: { callback: (v) => format(v), maxTicksLimit: 6 }, grid: { color: "#eef0f3" } };
  const labelAxis = { ticks: { autoSkip: true, autoSkipPadding: 12, maxRotation: 0 }, grid: { display: false } };
  return {
    figure,
    draw: () => new Chart(canvas, {
      type: "bar",
      data: { labels, datasets: [{ label: title, data: values, backgroundColor: "#4f7fd9", maxBarThickness: 48 }] },
      options: {
        indexAxis: horizontal ? "y" : "x",
        animation: false,
        responsive: true,
        maintainAspectRatio: false,
        plugins: { legend: { display: false }, tooltip: { callbacks: { label: (item) => format(item.raw) } } },
        scales: horizontal ? { x: valueAxis, y: { ...labelAxis, ticks: { ...labelAxis.ticks, autoSkip: false } } } : { x: labelAxis, y: valueAxis },
      },
    }),
  };
}

export async function usagePage(main, me) {
  const params = new URLSearchParams(location.search);
  const days = Number(params.get("days") || 30);
  const [rows, , quota] = await Promise.all([get(`/v1/usage?days=${days}`), import("./chart.umd.min.js"), quotaCard(me)]);
  const Chart = window.Chart;
  const byDay = new Map(periodDays(days).map((d) => [d, { key: d, tokens: 0, cost: 0, calls: 0 }]));
  const byAgent = new Map();
  for (const r of rows) {
    const tokens = r.prompt_tokens + r.completion_tokens;
    for (const [map, key] of [[byDay, r.day], [byAgent, r.agent]]) {
      const t = map.get(key) || { key, tokens: 0, cost: 0, calls: 0 };
      t.tokens += tokens; t.cost += r.cost_usd; t.calls += r.llm_calls;
      map.set(key, t);
    }
  }
  const daily = [...byDay.values()].sort((a, b) => a.key.localeCompare(b.key));
  const agents = [...byAgent.values()].sort((a, b) => b.tokens - a.tokens);
  const charts = [
    chart(Chart, "chart-tokens-day", "Tokens per day", daily.map((d) => dayLabel(d.key)), daily.map((d) => d.tokens), fmtCount),
    chart(Chart, "chart-cost-day", "Cost per day (USD)", daily.map((d) => dayLabel(d.key)), daily.map((d) => d.cost), (v) => COST.format(v)),
  ];
  if (agents.length) {
    charts.push(chart(Chart, "chart-tokens-agent", "Tokens per agent", agents.map((a) => a.key), agents.map((a) => a.tokens), fmtCount, true));
  }
  replace(main,
    h("h1", {}, `Usage · last ${days} days`),
    quota,
    rows.length ? null : h("p", { class: "muted" }, "No model calls in this period."),
    h("div", { class: "charts" }, charts.map((c) => c.figure)),
    h("table", { class: "list", id: "usage-table" },
      h("thead", {}, h("tr", {}, ["Agent", "LLM calls", "Tokens", "Cost"].map((c) => h("th", { class: c === "Agent" ? null : "num" }, c)))),
      h("tbody", {}, agents.map((a) => h("tr", { dataset: { agent: a.key } },
        h("td", {}, a.key), h("td", { class: "num" }, fmtCount(a.calls)), h("td", { class: "num" }, fmtCount(a.tokens)), h("td", { class: "num" }, fmtCost(a.cost)))))));
  for (const c of charts) c.draw();
}
