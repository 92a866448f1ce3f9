// Audit (admin scope): the hash-chained log, filtered, and the chain check.

import { get, query } from "./api.js";
import { h, replace, fmtTime, json } from "./dom.js";

export async function auditPage(main) {
  const tenant = h("input", { id: "audit-tenant", placeholder: "tenant (all)" });
  const kind = h("input", { id: "audit-kind", placeholder: "action contains…" });
  const body = h("tbody", { id: "audit-body" });
  const verdict = h("div", { id: "audit-verdict" });
  let after = 0;
  let rows = [];

  async function load(reset) {
    if (reset) { after = 0; rows = []; }
    const page = await get(`/v1/admin/audit${query({ tenant: tenant.value.trim(), after_id: after, limit: 200 })}`);
    rows = rows.concat(page);
    if (page.length) after = page[page.length - 1].id;
    draw();
    more.disabled = page.length < 200;
  }

  function draw() {
    const needle = kind.value.trim().toLowerCase();
    replace(body, rows.filter((r) => !needle || JSON.stringify(r).toLowerCase().includes(needle)).map((r) =>
      h("tr", {}, h("td", {}, String(r.id)), h("td", {}, fmtTime(r.created_at)), h("td", {}, r.tenant_id ?? ""),
        h("td", {}, r.actor ?? ""), h("td", {}, `${r.category}/${r.action}`), h("td", {}, r.subject ?? ""),
        h("td", {}, h("details", {}, h("summary", {}, "detail"), h("pre", {}, json(r.detail ?? r)))),
        h("td", { class: "hash" }, (r.hash || "").slice(0, 12)))));
  }

  const more = h("button", { onclick: () => load(false) }, "Load more");
  replace(main,
    h("h1", {}, "Audit"),
    h("div", { class: "filters" }, tenant, kind,
      h("button", { onclick: () => load(true) }, "Filter"),
      h("button", { id: "audit-verify", onclick: async () => {
        const v = await get(`/v1/admin/audit/verify${query({ tenant: tenant.value.trim() })}`);
        replace(verdict, v.ok
          ? h("strong", { class: "ok" }, `Chain intact: ${v.rows_checked} rows in ${v.chains_checked} chains.`)
          : h("strong", { class: "error" }, `Chain broken at row ${v.broken_id}.`));
      } }, "Verify chain")),
    verdict,
    h("table", { class: "list" }, h("thead", {}, h("tr", {}, ["#", "When", "Tenant", "Actor", "Action", "Subject", "Detail", "Hash"].map((c) => h("th", {}, c)))), body),
    more);
  kind.addEventListener("input", draw);
  await load(true);
}
