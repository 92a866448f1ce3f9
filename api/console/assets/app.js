// The console shell: who is signed in, the navigation, and which page a path draws.

import { get, api, setCsrf, ApiError } from "./api.js";
import { h, replace } from "./dom.js";
import { leave, navigate, setRenderer } from "./nav.js";
import { runsPage } from "./runs.js";
import { runPage } from "./run.js";
import { approvalsPage } from "./approvals.js";
import { sessionsPage, sessionPage } from "./sessions.js";
import { schedulesPage } from "./schedules.js";
import { usagePage } from "./usage.js";
import { auditPage } from "./audit.js";
import { grantsPage } from "./grants.js";
import { evalsPage, evalPage } from "./evals.js";

const PAGES = [
  ["runs", "Runs"],
  ["approvals", "Approvals"],
  ["grants", "Grants"],
  ["sessions", "Sessions"],
  ["schedules", "Schedules"],
  ["usage", "Usage"],
  ["evals", "Evals"],
  ["audit", "Audit"],
];

const state = { me: null };

async function signInWith(token) {
  const me = await api("POST", "/console/session", { token });
  return me;
}

async function whoAmI() {
  const me = await get("/console/session");
  state.me = me;
  setCsrf(me.csrf);
  const banner = document.getElementById("auth-banner");
  if (me.auth === "off") {
    banner.hidden = false;
    banner.className = "danger";
    replace(banner, "Authentication is OFF (KEEL_AUTH=off): every caller is a local admin. Never expose this API beyond your own machine.");
  } else {
    banner.hidden = true;
  }
  return me;
}

function drawChrome(active) {
  const me = state.me;
  replace(document.getElementById("nav"),
    PAGES.filter(([key]) => key !== "audit" || me?.is_admin).map(([key, label]) =>
      h("a", { href: `/console/${key}`, class: key === active ? "active" : "", "data-page": key }, label)));
  const who = document.getElementById("who");
  if (me?.signed_in) {
    replace(who,
      h("span", { id: "who-name" }, `${me.subject} @ ${me.tenant_id}`),
      me.expires_at ? h("span", { class: "muted", title: "session expires" }, ` · until ${new Date(me.expires_at * 1000).toLocaleTimeString()}`) : null,
      me.auth === "jwt" ? h("button", { id: "sign-out", class: "link", onclick: signOut }, "Sign out") : null);
  } else {
    replace(who);
  }
}

async function signOut() {
  await api("DELETE", "/console/session");
  state.me = null;
  navigate("/console/signin");
}

function signInPage(main, message) {
  const token = h("textarea", { id: "token", rows: 4, placeholder: "eyJhbGciOi…", autocomplete: "off", spellcheck: "false" });
  const note = h("p", { id: "signin-error", class: "error" }, message || "");
  const form = h("form", { id: "signin-form", onsubmit: async (e) => {
    e.preventDefault();
    try {
      await signInWith(token.value.trim());
      navigate("/console/runs");
    } catch (err) {
      replace(note, err instanceof ApiError ? err.detail : String(err));
    }
  } },
  h("label", { for: "token" }, "Bearer token"), token,
  h("button", { type: "submit" }, "Sign in"));
  replace(main,
    h("section", { class: "card narrow" },
      h("h1", {}, "Sign in to Keel"),
      h("p", {}, "Open the console link that ", h("code", {}, "keel dev"), " or ", h("code", {}, "keel console"),
        " prints to sign in as the local user, or paste a bearer token (", h("code", {}, "keel token"), " prints one)."),
      form, note));
}

async function render() {
  leave();
  const main = document.getElementById("main");
  let path = location.pathname.replace(/^\/console\/?/, "").replace(/\/$/, "");
  // A sign-in link: `#signin=<token>`; the fragment never reaches a server or a log.
  const fragment = new URLSearchParams(location.hash.slice(1));
  if (fragment.get("signin")) {
    const token = fragment.get("signin");
    history.replaceState({}, "", location.pathname);
    try {
      await signInWith(token);
    } catch (err) {
      await whoAmI().catch(() => null);
      history.replaceState({}, "", "/console/signin");
      drawChrome("");
      signInPage(main, `That sign-in link did not work: ${err.detail || err}. Run \`keel console\` for a fresh one.`);
      return;
    }
  }
  let me;
  try {
    me = await whoAmI();
  } catch (err) {
    replace(main, h("p", { class: "error" }, `The API did not answer: ${err.detail || err}`));
    return;
  }
  if (!me.signed_in) {
    drawChrome("");
    if (path !== "signin") history.replaceState({}, "", "/console/signin");
    signInPage(main);
    return;
  }
  if (path === "" || path === "signin") {
    path = "runs";
    history.replaceState({}, "", "/console/runs");
  }
  const [page, ...rest] = path.split("/");
  drawChrome(page);
  const id = rest.map(decodeURIComponent).join("/");
  const pages = {
    runs: () => (id ? runPage(main, id) : runsPage(main)),
    approvals: () => approvalsPage(main),
    grants: () => grantsPage(main),
    sessions: () => (id ? sessionPage(main, id) : sessionsPage(main)),
    schedules: () => schedulesPage(main),
    usage: () => usagePage(main, state.me),
    evals: () => (id ? evalPage(main, id) : evalsPage(main)),
    audit: () => auditPage(main),
  };
  const draw = pages[page];
  if (!draw) {
    replace(main, h("h1", {}, "Not found"), h("p", {}, "No console page at this address."));
    return;
  }
  try {
    await draw();
  } catch (err) {
    if (err instanceof ApiError) {
      replace(main, h("h1", { id: "error-title" }, err.status === 404 ? "Not found" : `Error ${err.status}`),
        h("p", { class: "error", id: "error-detail" }, err.detail));
    } else {
      replace(main, h("p", { class: "error" }, String(err)));
      throw err;
    }
  }
}

// Same-origin links navigate inside the console without a reload.
document.addEventListener("click", (e) => {
  const a = e.target.closest?.("a[href^='/console/']");
  if (!a || e.ctrlKey || e.metaKey || e.shiftKey || a.target === "_blank") return;
  e.preventDefault();
  navigate(a.getAttribute("href"));
});
setRenderer(render);
window.addEventListener("popstate", render);
window.addEventListener("keel:signed-out", () => {
  if (state.me?.auth === "jwt" && !location.pathname.endsWith("/signin")) {
    state.me = null;
    navigate("/console/signin");
  }
});

render();
