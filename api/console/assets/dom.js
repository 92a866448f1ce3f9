// Building the page from data without ever parsing it as HTML.
//
// Everything the console shows that came from a model, a tool or a user goes through
// `h` as text nodes or attribute values set by name, so it can never become markup,
// script or an event handler. There is no innerHTML anywhere in the console.

const SAFE_URL = /^(https?:|mailto:|\/(?!\/)|#)/i;

/** An element: `h("a", {href, class: "x", onclick: fn}, "text", child, [more])`. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value);
    } else if (key === "class") {
      el.className = value;
    } else if (key === "dataset") {
      Object.assign(el.dataset, value);
    } else if (key === "href" || key === "src") {
      el.setAttribute(key, safeUrl(String(value)));
    } else if (key === "value") {
      el.value = value;
    } else if (key === "checked" || key === "disabled" || key === "selected") {
      el[key] = Boolean(value);
    } else {
      el.setAttribute(key, value === true ? "" : String(value));
    }
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** Empty an element and fill it again. */
export function replace(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

/** A URL that cannot run script: http(s), mailto, same-origin paths and fragments only. */
export function safeUrl(url) {
  const trimmed = url.trim();
  return SAFE_URL.test(trimmed) ? trimmed : "#unsafe-link";
}

export function fmtTime(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  return d.toISOString().replace("T", " ").slice(0, 19) + "Z";
}

/** A schedule's time in its own zone, as the CLI prints it too (`api/core/schedules/
 * shown_time.py`): "Wed 2026-12-02 02:00:00 Europe/Berlin (UTC+01:00)". */
export function fmtZoned(iso, zone) {
  if (!iso) return "";
  let parts;
  try {
    parts = Object.fromEntries(new Intl.DateTimeFormat("en-US", {
      timeZone: zone, weekday: "short", year: "numeric", month: "2-digit", day: "2-digit",
      hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23", timeZoneName: "longOffset",
    }).formatToParts(new Date(iso)).map((p) => [p.type, p.value]));
  } catch {
    return fmtTime(iso); // a zone this browser does not know: UTC, marked Z
  }
  const offset = parts.timeZoneName === "GMT" ? "+00:00" : parts.timeZoneName.replace("GMT", "");
  return `${parts.weekday} ${parts.year}-${parts.month}-${parts.day} ${parts.hour}:${parts.minute}:${parts.second} ${zone} (UTC${offset})`;
}

export function fmtAgo(iso) {
  if (!iso) return "";
  const s = Math.round((Date.now() - new Date(iso).getTime()) / 1000);
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ago`;
  return `${Math.floor(s / 86400)}d ago`;
}

export function fmtLeft(iso) {
  const s = Math.round((new Date(iso).getTime() - Date.now()) / 1000);
  if (s <= 0) return "expired";
  const d = Math.floor(s / 86400);
  const hh = Math.floor((s % 86400) / 3600);
  const mm = Math.floor((s % 3600) / 60);
  const ss = s % 60;
  if (d) return `${d}d ${hh}h left`;
  if (hh) return `${hh}h ${mm}m left`;
  return `${mm}m ${ss}s left`;
}

const COUNT = new Intl.NumberFormat();

/** A count with the reader's thousands separators: 12345 → "12,345". */
export function fmtCount(n) {
  return COUNT.format(Number(n || 0));
}

export function fmtCost(usd) {
  return `$${Number(usd || 0).toFixed(4)}`;
}

export function json(value) {
  return JSON.stringify(value, null, 2);
}

export function statusBadge(status) {
  return h("span", { class: `badge status-${status}`, "data-status": status }, status);
}
