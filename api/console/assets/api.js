// Talking to Keel's REST API from the console: same origin, the session cookie, and the
// CSRF header on every call that changes something.

let csrf = "";

export function setCsrf(token) {
  csrf = token || "";
}

export class ApiError extends Error {
  constructor(status, detail) {
    super(detail);
    this.status = status;
    this.detail = detail;
  }
}

// Problems whose message is a sentence of its own, naming what it is about ("The task is
// empty …", "Unknown agent 'x' …"): shown alone. Any other says only what is wrong
// ("Must be at least 1, not 0."), so the field it is about goes before it, without `body.`.
const OWN_SENTENCES = new Set(["value_error", "blank_task", "json_invalid"]);

function problemText(d) {
  if (OWN_SENTENCES.has(d.type)) return d.msg;
  const where = (d.loc || []).filter((p, i) => i > 0 || !["body", "query", "path"].includes(p));
  return where.length ? `${where.join(".")}: ${d.msg}` : d.msg;
}

function detailOf(body, status) {
  if (!body) return `HTTP ${status}`;
  if (typeof body.detail === "string") return body.detail;
  if (Array.isArray(body.detail)) return body.detail.map(problemText).join(" ");
  return `HTTP ${status}`;
}

/** JSON from the API; throws `ApiError` with the server's sentence on failure. */
export async function api(method, path, body) {
  const headers = { accept: "application/json" };
  if (body !== undefined) headers["content-type"] = "application/json";
  if (method !== "GET" && method !== "HEAD") headers["x-keel-csrf"] = csrf;
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "same-origin",
  });
  if (response.status === 204) return null;
  const text = await response.text();
  let parsed = null;
  try { parsed = text ? JSON.parse(text) : null; } catch { parsed = null; }
  if (!response.ok) {
    // A refused sign-in is the sign-in page's to explain; any other 401 ends the session.
    if (response.status === 401 && !path.startsWith("/console/session")) {
      window.dispatchEvent(new CustomEvent("keel:signed-out"));
    }
    throw new ApiError(response.status, detailOf(parsed, response.status));
  }
  return parsed;
}

export const get = (path) => api("GET", path);
export const post = (path, body) => api("POST", path, body ?? {});

export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") q.set(k, v);
  const s = q.toString();
  return s ? `?${s}` : "";
}
