// The Usage page's quota card: what the caller's tenant (and the caller) may still spend
// today and this month (UTC), and, for an admin, a form that sets a tenant's quota.

import { api, get, ApiError } from "./api.js";
import { h, replace, fmtCost, fmtCount } from "./dom.js";

const CEILINGS = [
  ["tokens_per_day", "Tokens per day"],
  ["cost_usd_per_day", "Cost per day (USD)"],
  ["tokens_per_month", "Tokens per month"],
  ["cost_usd_per_month", "Cost per month (USD)"],
];

function figure(measure, value) {
  return measure === "tokens" ? fmtCount(value) : fmtCost(value);
}

function linesTable(view) {
  if (!view.lines.length) return h("p", { class: "muted", id: "quota-none" }, `Tenant ${view.tenant_id} has no quota.`);
  return h("table", { class: "list", id: "quota-table" },
    h("thead", {}, h("tr", {}, ["Whose", "Period", "Limit", "Used", "Remaining", "Resets (UTC)"].map((c) => h("th", {}, c)))),
    h("tbody", {}, view.lines.map((ln) => h("tr", { dataset: { period: ln.period, measure: ln.measure, reached: String(ln.reached) } },
      h("td", {}, ln.user_id ? `user ${ln.user_id}` : "tenant"),
      h("td", {}, `${ln.period === "day" ? "daily" : "monthly"} ${ln.measure === "tokens" ? "tokens" : "cost"}`),
      h("td", { class: "num" }, figure(ln.measure, ln.limit)),
      h("td", { class: "num" }, figure(ln.measure, ln.used)),
      h("td", { class: `num ${ln.reached ? "error" : ""}`, "data-remaining": "" }, ln.reached ? "0 (reached)" : figure(ln.measure, ln.remaining)),
      h("td", {}, ln.resets_at.replace("T", " ").slice(0, 16))))));
}

function adminForm(me, redraw) {
  const tenant = h("input", { id: "quota-tenant", value: me.tenant_id, required: true, maxlength: 128, "aria-label": "Tenant" });
  const user = h("input", { id: "quota-user", placeholder: "user (optional)", maxlength: 256, "aria-label": "User" });
  const inputs = CEILINGS.map(([key, label]) => h("input", { id: `quota-${key}`, type: "number", step: "any", placeholder: label, "aria-label": label }));
  const note = h("div", { id: "quota-note" });
  return h("form", { id: "quota-form", onsubmit: async (e) => {
    e.preventDefault();
    replace(note);
    const body = {};
    CEILINGS.forEach(([key], i) => { if (inputs[i].value !== "") body[key] = Number(inputs[i].value); });
    const who = user.value.trim();
    const path = `/v1/admin/quotas/tenants/${encodeURIComponent(tenant.value.trim())}${who ? `?user=${encodeURIComponent(who)}` : ""}`;
    try {
      await api("PUT", path, body);
      replace(note, h("span", { class: "ok" }, `Quota set for ${who ? `user ${who} of ` : ""}tenant ${tenant.value.trim()}.`));
      await redraw();
    } catch (err) { replace(note, h("span", { class: "error" }, err instanceof ApiError ? err.detail : String(err))); }
  } },
  h("strong", {}, "Set a quota (admin)"), tenant, user, inputs, h("button", { type: "submit", id: "quota-save" }, "Save"), note);
}

/** The quota card; an admin's also holds the form that sets one. */
export async function quotaCard(me) {
  const lines = h("div", {});
  const card = h("section", { class: "card", id: "quota" }, h("h2", {}, "Quota"), lines);
  const redraw = async () => {
    const view = await get("/v1/usage/quota");
    replace(lines, linesTable(view), view.refused ? h("p", { class: "error", id: "quota-refused" }, view.refused) : null);
  };
  await redraw();
  if (me?.is_admin) card.append(adminForm(me, redraw));
  return card;
}
