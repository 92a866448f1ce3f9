// Grants: the rules `approve_always` left behind, with who gave them; each revocable.
// Patterns and subjects come from model proposals: they are shown as text only (`h`).

import { api, get, ApiError } from "./api.js";
import { h, replace, fmtTime } from "./dom.js";

function scopeOf(g) {
  if (g.kind === "session") return `session ${g.session_id}`;
  if (g.kind === "agent") return `agent ${g.agent} for ${g.user}`;
  return `run ${g.run_id}`;
}

export async function grantsPage(main) {
  const body = h("tbody", { id: "grants-body" });
  const info = h("p", { class: "muted", id: "grants-info" });
  const all = h("input", { type: "checkbox", id: "grants-all" });

  function row(g) {
    const note = h("span", { class: "error grant-error" });
    const revoke = g.status === "active"
      ? h("button", { class: "grant-revoke", onclick: async () => {
          revoke.disabled = true;
          try {
            const done = await api("DELETE", `/v1/grants/${encodeURIComponent(g.id)}`);
            tr.replaceWith(row(done));
          } catch (err) {
            revoke.disabled = false;
            replace(note, err instanceof ApiError ? err.detail : String(err));
          }
        } }, "Revoke")
      : null;
    const tr = h("tr", { class: "grant", dataset: { id: g.id, status: g.status } },
      h("td", { class: "grant-tool" }, g.permission),
      h("td", {}, h("code", { class: "grant-pattern" }, g.pattern)),
      h("td", { class: "grant-scope" }, scopeOf(g)),
      h("td", {}, g.granted_by),
      h("td", {}, fmtTime(g.created_at)),
      h("td", {}, g.until ? fmtTime(g.until) : "—"),
      h("td", { class: "grant-status" }, g.revoked_by ? `${g.status} by ${g.revoked_by}` : g.status),
      h("td", {}, revoke, note));
    return tr;
  }

  async function load() {
    const { grants } = await get(`/v1/grants${all.checked ? "?all=true" : ""}`);
    replace(body, grants.map(row));
    replace(info, grants.length
      ? `${grants.length} grant${grants.length === 1 ? "" : "s"}, newest first`
      : "No grants: “approve always” on an approval makes one.");
  }

  all.addEventListener("change", load);
  replace(main,
    h("h1", {}, "Grants"),
    h("p", {}, "What “approve always” allowed beyond one call. Revoking one makes the runs it covers ask again at their next call."),
    h("label", { class: "filters" }, all, " show revoked and expired"),
    info,
    h("table", { class: "list", id: "grants" },
      h("thead", {}, h("tr", {}, ["Tool", "Pattern", "Where", "Granted by", "Created", "Until", "Status", ""].map((c) => h("th", {}, c)))),
      body));
  await load();
}

/** The "approve always" scope of an approval card: where it holds, a glob, until when.
 * `scope()` is the decision's `grant` (undefined: the default, this subject for the
 * session), or a string saying what is missing. */
export function grantPicker(ia) {
  const kind = h("select", { class: "grant-kind" },
    h("option", { value: "" }, "this subject, for the session (default)"),
    h("option", { value: "call" }, "this call only"),
    h("option", { value: "run" }, "this run"),
    h("option", { value: "session" }, "this session"),
    h("option", { value: "agent" }, "this agent, for the requester"));
  const pattern = h("input", { class: "grant-pattern-input", placeholder: `glob over the subject, e.g. ${ia.subject || "*"}` });
  const until = h("input", { class: "grant-until", type: "datetime-local" });
  const element = h("details", { class: "grant-picker" },
    h("summary", {}, "Approve always: how far"),
    h("label", {}, "Where ", kind), h("label", {}, " Pattern ", pattern), h("label", {}, " Until ", until));
  function scope() {
    const glob = pattern.value.trim();
    if (!kind.value && !glob && !until.value) return undefined;
    if (!kind.value) return "Choose where the grant holds.";
    const grant = { kind: kind.value };
    if (glob) grant.pattern = glob;
    if (until.value) grant.until = new Date(until.value).toISOString();
    return grant;
  }
  return { element, scope };
}
