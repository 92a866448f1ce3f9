// Usage: the tenant's tokens and cost per day and per agent, as bar charts and a table.

import { get } from "./api.js";
import { h, replace, fmtCost } from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";

function svg(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  for (const c of children) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

function bars(title, rows, value, label) {
  const width = 640, height = 160, pad = 24;
  const max = Math.max(1, ...rows.map(value));
  const w = rows.length ? (width - pad) / rows.length : 0;
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height + 30}`, class: "chart", role: "img", "aria-label": title });
  rows.forEach((r, i) => {
    const bh = (value(r) / max) * height;
    chart.append(svg("rect", { x: pad + i * w + 2, y: height - bh, width: Math.max(w - 4, 1), height: bh, class: "bar" },
      svg("title", {}, `${label(r)}: ${value(r)}`)));
    if (rows.length <= 16) chart.append(svg("text", { x: pad + i * w + w / 2, y: height + 14, "text-anchor": "middle", class: "axis" }, label(r)));
  });
  chart.append(svg("text", { x: 0, y: 12, class: "axis" }, String(max)));
  return h("figure", { class: "card" }, h("figcaption", {}, title), chart);
}

export async function usagePage(main) {
  const params = new URLSearchParams(location.search);
  const days = Number(params.get("days") || 30);
  const rows = await get(`/v1/usage?days=${days}`);
  const byDay = new Map();
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
  replace(main,
    h("h1", {}, `Usage · last ${days} days`),
    rows.length ? null : h("p", { class: "muted" }, "No model calls in this period."),
    bars("Tokens per day", daily, (r) => r.tokens, (r) => r.key.slice(5)),
    bars("Cost per day (USD)", daily, (r) => Number(r.cost.toFixed(6)), (r) => r.key.slice(5)),
    bars("Tokens per agent", agents, (r) => r.tokens, (r) => r.key),
    h("table", { class: "list", id: "usage-table" },
      h("thead", {}, h("tr", {}, ["Agent", "LLM calls", "Tokens", "Cost"].map((c) => h("th", {}, c)))),
      h("tbody", {}, agents.map((a) => h("tr", { dataset: { agent: a.key } }, h("td", {}, a.key), h("td", {}, String(a.calls)), h("td", {}, String(a.tokens)), h("td", {}, fmtCost(a.cost)))))));
}
